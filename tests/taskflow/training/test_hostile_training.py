"""Training against a hostile user: bad data, options, outputs, checkpoints and models get one line
naming the file, field or option, before any cluster starts, and change no file the user did not
name as an output (issue 72's findings, each as a class)."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import stat
import struct
import zlib

import numpy as np
import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None:
    if os.environ.get("TASKFLOW_REQUIRE_TORCH"):
        raise RuntimeError("TASKFLOW_REQUIRE_TORCH is set but torch or scikit-learn is not installed")
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

import torch  # noqa: E402

import taskflow  # noqa: E402
from taskflow.app.cli import main  # noqa: E402
from taskflow.errors import FormatError, UsageError, WorkflowError  # noqa: E402
from workflows.images import MAX_PIXELS, decode, open_dataset, read_files, write_digits  # noqa: E402
from workflows.torch_models import small_cnn  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


@pytest.fixture
def copy(digits, tmp_path):
    """A copy of the digits dataset this test may spoil."""

    def make(name="d"):
        return shutil.copytree(digits, tmp_path / name)

    return make


def _one_line(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (code, err)
    return err


def _png_header(w: int, h: int) -> bytes:
    """A PNG that says it is ``w`` x ``h`` gray pixels (its data is a few bytes: a bomb's header)."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


# ------------------------------------------------------------------ outputs
@pytest.mark.parametrize("option", ["-o", "--profile", "--cost-graph", "--plot", "--checkpoint"])
def test_train_refuses_a_device_as_any_output_before_training(digits, capsys, option, no_cluster):
    err = _one_line(capsys, ["train", digits, option, "/dev/null"])
    assert "'/dev/null': is a device" in err and option in err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_train_writes_no_output_inside_its_dataset_and_checks_all_before_any(copy, tmp_path, capsys, no_cluster):
    data = copy()
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    victim = sorted((data / "train" / "0").iterdir())[0]
    for option in ("-o", "--plot", "--cost-graph"):  # each aimed at a PNG of the dataset itself
        assert "inside the input folder" in _one_line(capsys, ["train", data, option, victim])
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    # one bad output among good ones: none is written, and no training ran (no_cluster)
    err = _one_line(
        capsys, ["train", data, "--profile", tmp_path / "p.json", "--cost-graph", "/proc/x", "-o", tmp_path / "h.json"]
    )
    assert "--cost-graph '/proc/x': cannot write" in err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "h.json").exists()


def test_a_fifo_checkpoint_is_refused_at_once(digits, tmp_path, capsys, no_cluster):
    fifo = tmp_path / "ck.pt"
    os.mkfifo(fifo)
    err = _one_line(capsys, ["train", digits, "--checkpoint", fifo])
    assert "--checkpoint" in err and "a pipe" in err
    with pytest.raises(UsageError, match="a pipe"):
        taskflow.train(small_cnn, digits, checkpoint=fifo)


def test_several_schedulers_write_their_plots_beside_each_other(digits, tmp_path, capsys, no_cluster):
    # the per-scheduler names are checked up front (acc.heft.png is an image, not '.heft')
    from taskflow.app.cli.running import per_scheduler
    from taskflow.files import check_outputs

    check_outputs([("--plot", per_scheduler(str(tmp_path / "acc.png"), n, True)) for n in ("heft", "placed")])


# ------------------------------------------------------------------ the machine
def test_more_workers_than_the_machine_holds_are_refused_at_once(digits, capsys, no_cluster):
    err = _one_line(capsys, ["train", digits, "--workers", "64"])
    assert "64 worker processes" in err and "--address" in err
    with pytest.raises(UsageError, match="worker processes"):
        taskflow.run(taskflow.load_graph("examples/heft_paper.graph.json"), "heft", workers=4 * os.cpu_count() + 1)


def test_an_image_over_the_input_limit_is_named_and_not_read(tmp_path):
    from taskflow.formats import input_limit

    big = tmp_path / "big.png"
    with open(big, "wb") as f:  # sparse: its size is said, never read
        f.truncate(10_000)
    with input_limit(4096), pytest.raises(WorkflowError, match=r"image '.*big.png' is 10,000 bytes, over the input"):
        read_files([str(big)])
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(WorkflowError, match="pipe.png.*a pipe"):
        read_files([str(fifo)])


@pytest.mark.parametrize("side", [9000, 13_000, 20_000])
def test_an_image_of_too_many_pixels_is_named_from_its_header(tmp_path, side):
    p = tmp_path / "huge.png"
    p.write_bytes(_png_header(side, side))
    with pytest.raises(WorkflowError, match=r"image '.*huge.png'"):
        decode([p.read_bytes()], [str(p)])
    assert side * side > MAX_PIXELS


def test_a_dataset_whose_first_image_is_huge_is_refused_before_a_model_is_sized(copy, capsys, no_cluster):
    data = copy()
    first = sorted((data / "train" / "0").iterdir())[0]
    first.write_bytes(_png_header(13_000, 13_000))
    err = _one_line(capsys, ["train", data])
    assert str(first.name) in err and "internal" not in err


def test_palette_images_are_read_as_their_colours(tmp_path):
    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
    p = tmp_path / "p.png"
    Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16).save(p)
    want = np.asarray(Image.open(p).convert("RGB"))
    got = decode(read_files([str(p)]), [str(p)])[0]
    assert got.shape == (8, 8, 3) and np.array_equal(got, want)


# ------------------------------------------------------------------ data that would give a wrong result
def test_val_must_hold_the_classes_of_train(copy):
    data = copy("missing")
    shutil.rmtree(data / "val" / "3")
    with pytest.raises(WorkflowError, match="only in train/: 3"):
        open_dataset(data)
    data = copy("empty")  # an empty class folder in train/ only: the val labels would shift
    for f in (data / "train" / "2").iterdir():
        f.unlink()
    with pytest.raises(WorkflowError, match="only in val/: 2"):
        open_dataset(data)


def test_a_one_class_dataset_is_refused(copy):
    data = copy()
    for split in ("train", "val"):
        for c in (data / split).iterdir():
            if c.name != "0":
                shutil.rmtree(c)
    with pytest.raises(WorkflowError, match="holds one class"):
        open_dataset(data)


def test_huge_shares_split_the_batch_as_equal_ones_do(digits):
    a = TorchTraining(small_cnn, digits, shares=(1e308, 1e308), batch=8)
    b = TorchTraining(small_cnn, digits, shares=(1e-300, 1e-300), batch=8)
    assert a.counts == b.counts == (4, 4)


def test_workers_with_stages_and_bad_seeds_are_refused(digits, capsys, no_cluster):
    assert "one worker per stage" in _one_line(capsys, ["train", digits, "--workers", "5", "--stages", "2"])
    assert "--seed" in _one_line(capsys, ["train", digits, "--seed", str(2**64)])
    with pytest.raises(UsageError, match="seed must be an integer from 0"):
        taskflow.train(small_cnn, digits, seed=-1)
    with pytest.raises(UsageError, match="quiet must be True or False"):
        taskflow.train(small_cnn, digits, quiet="no")


# ------------------------------------------------------------------ the user's model
@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "usermods.py").write_text(
        "import torch\n"
        "def raises():\n"
        "    raise RuntimeError('my factory broke')\n"
        "def five():\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 5))\n"
        "def wrong_shape():\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(100, 10))\n"
        "class Bad(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(64, 10)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x)  # forgot to flatten\n"
        "def huge():\n"
        "    return torch.nn.Linear(1 << 20, 1 << 20)\n"
    )
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    "model, said",
    [
        ("usermods:raises", "the model factory usermods.raises raised RuntimeError: my factory broke (at "),
        ("json:loads", "the model factory json.loads raised TypeError"),
        ("usermods:five", "gives outputs of shape (5,) per sample; the data has 10 classes"),
        ("usermods:wrong_shape", "cannot take the data's samples (1x8x8 images"),
        ("usermods:Bad", "usermods.py:"),
        ("usermods:huge", "parameters: with gradients and optimizer state"),
        ("exits:f", "--model exits:f: importing it raised SystemExit: 3"),
        ("json:dumps", "the model factory json.dumps raised TypeError"),
    ],
)
def test_a_model_that_cannot_train_is_said_before_any_cluster_starts(
    digits, user_module, capsys, model, said, no_cluster
):
    err = _one_line(capsys, ["train", digits, "--model", model])
    assert said in err and "a bug in taskflow" not in err, err


# ------------------------------------------------------------------ checkpoints
def _job(digits, **kw):
    return TorchTraining(functools.partial(small_cnn), digits, **kw)


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda ck: ck.pop("fingerprint"), "'fingerprint' is missing"),
        (lambda ck: ck["history"].pop("epochs"), "'history' must hold the lists"),
        (lambda ck: ck.update(epoch="one"), "'epoch' must be an integer"),
        (lambda ck: ck.update(states=[1, 2]), "'states' must be a list of each rank's state"),
        (
            lambda ck: ck["states"][0]["params"].__setitem__(0, torch.zeros(3)),
            "state 0's parameters are not this model's",
        ),
        (lambda ck: ck["states"].pop(), "it holds 1 states for 2 workers"),
    ],
)
def test_a_damaged_checkpoint_is_named_before_any_cluster_starts(digits, tmp_path, damage, said, no_cluster):
    from taskflow.training.checkpoint import fingerprint as _fingerprint
    from workflows.torch_tasks import init_state

    job = _job(digits, batch=8)
    state = init_state(job.ctx, 0)
    ck = {
        "format": "taskflow-train/1",
        "epoch": 0,
        "states": [state, state],
        "fingerprint": _fingerprint(job),
        "counts": [4, 4],
        "history": {"epochs": [{"wall": 1.0}], "losses": []},
    }
    damage(ck)
    path = tmp_path / "ck.pt"
    torch.save(ck, path)
    with pytest.raises((FormatError, UsageError), match=said) as e:
        taskflow.train(functools.partial(small_cnn), digits, batch=8, checkpoint=path)
    assert str(path) in str(e.value)


def test_a_checkpoint_of_other_data_with_as_many_images_is_refused(copy, tmp_path, no_cluster):
    from taskflow.training.checkpoint import fingerprint as _fingerprint
    from workflows.torch_tasks import init_state

    data = copy()
    job = _job(data, batch=8)
    state = init_state(job.ctx, 0)
    path = tmp_path / "ck.pt"
    torch.save(
        {
            "format": "taskflow-train/1",
            "epoch": 0,
            "states": [state, state],
            "fingerprint": _fingerprint(job),
            "counts": [4, 4],
            "history": {"epochs": [{"wall": 1.0}], "losses": []},
        },
        path,
    )
    a, b = sorted((data / "train" / "0").iterdir())[:2], sorted((data / "train" / "1").iterdir())[:2]
    a[0].rename(data / "train" / "1" / ("moved-" + a[0].name))  # as many images, one of another class
    with pytest.raises(UsageError, match=r"written by another job \(it differs in data\)"):
        taskflow.train(functools.partial(small_cnn), data, batch=8, checkpoint=path)
    assert b  # the class folders are still there
