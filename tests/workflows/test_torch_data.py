"""A researcher's own ``torch.utils.data.Dataset`` where an image folder goes, and the device the
tasks compute on: the same parameters as the single-process loop, each sample's random transform
seeded, bad Datasets and devices named in one line."""

from __future__ import annotations

import functools
import importlib.util
import os
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::taskflow.TaskflowWarning")

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None:
    if os.environ.get("TASKFLOW_REQUIRE_TORCH"):
        raise RuntimeError("TASKFLOW_REQUIRE_TORCH is set but torch or scikit-learn is not installed")
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

import torch  # noqa: E402

import taskflow  # noqa: E402
from taskflow.errors import TaskflowError  # noqa: E402
from workflows.torch_data import DatasetSplit, fetch  # noqa: E402
from workflows.torch_models import small_cnn  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402

CNN = functools.partial(small_cnn)


class Digits(torch.utils.data.Dataset):
    """scikit-learn's digits as 1x8x8 tensors in [-1, 1], with a random transform (noise and a
    shift) drawn from torch's generator, as a user's Dataset would."""

    classes = [str(k) for k in range(10)]

    def __init__(self, part: str, noise: float = 0.1):
        from sklearn.datasets import load_digits

        d = load_digits()
        order = np.random.default_rng(0).permutation(len(d.target))
        keep = order[360:] if part == "train" else order[:360]
        self.x = torch.from_numpy((d.images[keep] / 8.0 - 1.0).astype(np.float32))[:, None]
        self.y = torch.from_numpy(d.target[keep].astype(np.int64))
        self.noise = noise

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.noise:
            x = torch.roll(x, int(torch.randint(-1, 2, ())), dims=2) + self.noise * torch.randn_like(x)
        return x, self.y[i]


class Unlabelled(Digits):
    def __getitem__(self, i):
        return self.x[i]


class FloatLabels(Digits):
    def __getitem__(self, i):
        return self.x[i], 0.5


class Locked(Digits):
    def __init__(self, part):
        super().__init__(part)
        self.lock = threading.Lock()


def seq():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        yield torch.zeros(1, 8, 8), 0


@pytest.fixture(scope="module")
def data():
    return Digits("train"), Digits("val", noise=0.0)


def rel_err(state, ref) -> float:
    return max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(state["params"], ref["params"]))


def test_each_samples_random_transform_is_seeded_by_seed_epoch_and_sample(data):
    ds = data[0]
    before = torch.get_rng_state()
    a, b = fetch(ds, [3, 7], 0, 5), fetch(ds, [7, 3], 0, 5)
    assert np.array_equal(a[0][0], b[1][0]) and np.array_equal(a[1][0], b[0][0])  # order does not matter
    assert not np.array_equal(a[0][0], fetch(ds, [3], 1, 5)[0][0])  # another epoch, another draw
    assert not np.array_equal(a[0][0], fetch(ds, [3], 0, 6)[0][0])  # another seed, another draw
    assert torch.equal(torch.get_rng_state(), before)  # the caller's generator is left as it was
    assert a[0][1] == int(ds.y[3])


@pytest.mark.parametrize("fuse, prefetch", [(False, 0), (True, 0), (True, 1)])
def test_a_dataset_trains_to_the_single_process_loops_parameters(client, data, fuse, prefetch):
    spec = TorchTraining(CNN, data, workers=2, batch=64, iterations=5, bucket_mb=0.02, fuse=fuse, prefetch=prefetch)
    g = spec.graph(0)
    kinds = {t.meta["category"] for t in g.tasks()}
    assert "data" in kinds and not kinds & {"read", "decode", "augment"}
    assert ("fetch" in kinds) == (not fuse)
    rep = taskflow.run(g, "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, _ = spec.reference(1)
    for t in spec.final_tasks(0):
        assert rel_err(rep.results[t], ref) < 1e-5
    # the reference itself: a plain loop over the global batches, each loaded by the Dataset
    assert rel_err(ref, {"params": [p.detach() for p in CNN().parameters()]}) > 1e-3  # it trained


def test_train_takes_a_dataset_pair_evaluates_and_resumes_to_the_same_parameters(client, data, tmp_path):
    ck = tmp_path / "ck.pt"
    kw = dict(workers=2, batch=64, iterations=4, client=client, quiet=True, seed=3, device="cpu")
    whole = taskflow.train(CNN, data, epochs=2, **kw)
    assert [e["epoch"] for e in whole.epochs] == [0, 1] and 0.0 <= whole.epochs[-1]["accuracy"] <= 1.0
    assert whole.epochs[-1]["breakdown"]["loading"] > 0 and whole.config["device"] == "cpu"
    taskflow.train(CNN, data, epochs=1, checkpoint=ck, **kw)
    resumed = taskflow.train(CNN, data, epochs=2, checkpoint=ck, **kw)
    assert resumed.resumed_from == 0
    assert rel_err(resumed.states[0], whole.states[0]) < 1e-6
    with pytest.raises(TaskflowError, match="another"):  # other data under the same checkpoint
        taskflow.train(CNN, (Digits("train", noise=0.2), data[1]), epochs=3, checkpoint=ck, **kw)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Stream(), "map-style"),
        (lambda: Unlabelled("train"), "expected a pair"),
        (lambda: FloatLabels("train"), "label must be an integer"),
        (lambda: Locked("train"), "cannot be sent to the workers"),
        (lambda: [1, 2, 3], "pair must be"),
        (lambda: (Digits("train"), np.zeros(3)), "val"),
    ],
)
def test_a_dataset_that_cannot_serve_is_named_in_one_line(make, message, no_cluster):
    with pytest.raises(TaskflowError, match=message) as e:
        taskflow.train(CNN, make(), epochs=1, quiet=True)
    assert "\n" not in str(e.value)


def test_what_a_dataset_does_not_take_is_refused(data, no_cluster):
    with pytest.raises(TaskflowError, match="a Dataset transforms its samples itself"):
        taskflow.train(CNN, data, pad=2, quiet=True)
    with pytest.raises(TaskflowError, match="image folders"):
        taskflow.train(seq, data, stages=2, quiet=True)
    with pytest.raises(TaskflowError, match="cannot take the data's samples"):  # 3 channels asked for, 1 given
        taskflow.train(functools.partial(small_cnn, in_channels=3), data, quiet=True)
    assert DatasetSplit(data[0]).shape() == (1, 8, 8)


def test_a_device_torch_does_not_know_or_cannot_see_is_refused_before_any_cluster(data, no_cluster):
    with pytest.raises(TaskflowError, match="not a device torch knows"):
        taskflow.train(CNN, data, device="gpu0", quiet=True)
    with pytest.raises(TaskflowError, match="pipeline stages run on the CPU"):
        taskflow.train(seq, "folder", stages=2, device="cuda", quiet=True)
    if not torch.cuda.is_available():
        with pytest.raises(TaskflowError, match="sees no CUDA device"):
            taskflow.train(CNN, data, device="cuda", quiet=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the device option's GPU run needs one")
def test_on_a_gpu_the_states_stay_on_it_and_train_as_the_cpu_loop(client, data):
    spec = TorchTraining(CNN, data, workers=2, batch=64, iterations=4, device="cuda", fuse=True)
    rep = taskflow.run(spec.graph(0), "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, _ = TorchTraining(CNN, data, workers=2, batch=64, iterations=4).reference(1)
    for t in spec.final_tasks(0):
        st = rep.results[t]
        assert all(p.is_cuda for p in st["params"])
        assert rel_err({"params": [p.cpu() for p in st["params"]]}, ref) < 1e-4


USER_DATA = """
import numpy as np, torch

class Noise(torch.utils.data.Dataset):
    classes = ["a", "b"]
    def __len__(self):
        return 96
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(1, 8, 8, generator=g) + (i % 2) + 0.1 * torch.randn(1, 8, 8), i % 2

def pair():
    return Noise(), Noise()
"""


def test_the_command_trains_a_datasets_module_and_writes_its_trace_and_one_iterations_gantt(
    tmp_path, monkeypatch, capsys, client
):
    import json

    from taskflow.app.cli import main

    (tmp_path / "userdata.py").write_text(USER_DATA)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "train",
                "userdata:pair",
                "--epochs",
                "2",
                "--iterations",
                "3",
                "--batch",
                "32",
                "--device",
                "cpu",
                "--chrome-trace",
                "t.json",
                "--timeline",
                "g.png",
                "-o",
                "h.json",
                "-q",
                "--address",  # the module's cluster: its workers get the user's module by value
                client.scheduler.address,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("epoch 2: ") and "ms/iteration: compute" in out[0]  # -q: the last
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    steps = [e for e in events if e["cat"] == "forward-backward"]
    assert len(steps) == 2 * 2 * 3 and {e["args"]["epoch"] for e in steps} == {1, 2}
    assert {e["args"]["rank"] for e in steps} == {0, 1} and all(e["dur"] > 0 for e in steps)
    # the epochs lie one after the other on the run's clock
    assert min(e["ts"] for e in steps if e["args"]["epoch"] == 2) > max(
        e["ts"] for e in steps if e["args"]["epoch"] == 1
    )
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "h.json").read_text())["config"]["device"] == "cpu"
    for argv, said in (
        (["userdata:nothing"], "DATA userdata:nothing: cannot load"),
        (["userdata:pair", "--model", "mlp", "--device", "tpu9"], "not a device torch knows"),
        (["userdata:pair", "--repeat", "2", "--timeline", "x.png"], "--repeat goes without"),
    ):
        assert main(["train", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and "\n" not in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["g.png", "h.json", "t.json", "userdata.py"]
