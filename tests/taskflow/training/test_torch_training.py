"""Real training with PyTorch: datasets on disk, an epoch as a task graph on Dask workers, equal to
the plain single-process loop; checkpoints, a killed worker, a killed run; bad input."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::taskflow.TaskflowWarning")  # each run plans with guessed costs

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None:
    if os.environ.get("TASKFLOW_REQUIRE_TORCH"):  # CI installs the extra: these tests must run there
        raise RuntimeError("TASKFLOW_REQUIRE_TORCH is set but torch or scikit-learn is not installed")
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

import torch  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import taskflow  # noqa: E402
from taskflow.errors import TaskflowError, WorkflowError  # noqa: E402
from workflows.images import ImageFolder, decode, read_files, write_digits, write_synthetic  # noqa: E402
from workflows.torch_models import mlp, small_cnn  # noqa: E402
from workflows.torch_tasks import make_model  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402
from tests.conftest import NO_HTTP  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CNN = functools.partial(small_cnn)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        yield c


def rel_err(state, ref) -> float:
    return max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(state["params"], ref["params"]))


def nan_loss(out, y):
    return torch.nn.functional.cross_entropy(out, y) * float("nan")


# ----------------------------------------------------------------------------- data on disk
def test_digits_are_written_as_class_folders_of_png_that_decode_to_the_original_pixels(digits):
    from sklearn.datasets import load_digits

    train, val = ImageFolder(digits, "train"), ImageFolder(digits, "val")
    assert len(train) + len(val) == 1797 and len(val) == 359
    assert train.classes == tuple(str(k) for k in range(10)) and set(train.labels.tolist()) == set(range(10))
    assert ImageFolder(digits, "train").shape() == (1, 8, 8)
    # the permutation is seeded: image i of the split is sample order[...] of scikit-learn's set
    order = np.random.default_rng(0).permutation(1797)
    d = load_digits()
    for k in (0, 5, 100):
        i = order[k]  # val holds order[:359], written in that order into class folders
        path = os.path.join(digits, "val", str(d.target[i]), f"{k:05d}.png")
        img = decode(read_files([path]), [path])[0][:, :, 0]
        assert np.array_equal(img, np.clip(np.round(d.images[i] * 255 / 16), 0, 255).astype(np.uint8))


def test_synthetic_images_are_seeded_and_refuse_to_overwrite(tmp_path):
    a = write_synthetic(tmp_path / "a", samples=40, classes=4, size=16, seed=3)
    b = write_synthetic(tmp_path / "b", samples=40, classes=4, size=16, seed=3)
    fa, fb = ImageFolder(a, "train"), ImageFolder(b, "train")
    assert fa.shape() == (3, 16, 16) and len(fa) + len(ImageFolder(a, "val")) == 40
    assert [Path(p).read_bytes() for p in fa.paths] == [Path(p).read_bytes() for p in fb.paths]
    with pytest.raises(WorkflowError, match="already holds a dataset"):
        write_synthetic(tmp_path / "a", samples=40)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dataset-")]  # no half-written folder left


def _made(path: Path, files=(), folders=()) -> Path:
    for f in folders:
        (path / f).mkdir(parents=True)
    for f in files:
        (path / f).write_text("x")
    return path


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: _made(p, folders=["empty"]) / "empty", "holds no image"),
        (lambda p: _made(p, files=["file"]) / "file", "cannot be read"),
        (lambda p: _made(p, folders=["noimg/a"], files=["noimg/a/x.txt"]) / "noimg", "holds no image"),
    ],
)
def test_a_dataset_folder_that_cannot_serve_is_named(tmp_path, make, message):
    folder = make(tmp_path)
    with pytest.raises(WorkflowError, match=message) as e:
        ImageFolder(folder)
    assert os.fspath(folder) in str(e.value)


def test_a_corrupt_image_is_named_by_the_task_that_decodes_it(tmp_path, digits):
    import shutil

    data = tmp_path / "d"
    shutil.copytree(digits, data)
    bad = sorted((data / "train" / "3").iterdir())[0]
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    spec = TorchTraining(CNN, data, workers=2, batch=1400)
    with pytest.raises(taskflow.TaskFailed, match=f"image '{bad}' cannot be decoded") as e:
        taskflow.execute(spec.graph(0))
    assert e.value.task.endswith(".decode")


# ----------------------------------------------------------------------------- the job's checks
def test_bad_jobs_get_one_clear_line(digits):
    with pytest.raises(
        WorkflowError, match=r"data \(train\) must be a folder's path or a map-style torch Dataset.*got int"
    ):
        TorchTraining(CNN, 3)
    with pytest.raises(WorkflowError, match="returned int, not a torch.nn.Module"):
        TorchTraining(lambda: 3, digits)
    with pytest.raises(WorkflowError, match="not a module"):
        TorchTraining(small_cnn(), digits)
    with pytest.raises(WorkflowError, match="batch 65 is not divisible by 2 workers"):
        TorchTraining(CNN, digits, batch=65)
    with pytest.raises(WorkflowError, match="shares must be 2 positive numbers"):
        TorchTraining(CNN, digits, shares=(1, 2, 3))
    with pytest.raises(WorkflowError, match="give a rank no sample"):
        TorchTraining(CNN, digits, batch=8, shares=(100, 1))
    with pytest.raises(WorkflowError, match="allreduce must be"):
        TorchTraining(CNN, digits, allreduce="butterfly")
    with pytest.raises(WorkflowError, match="optimizer factory returned"):
        TorchTraining(CNN, digits, optimizer=lambda params: None)


def test_buckets_are_cut_by_bytes_in_backward_order_as_ddp_cuts_them():
    ctx = make_model(functools.partial(mlp, features=64, hidden=(512, 512)), bucket_mb=1.0)
    # parameters: w0 64x512, b0, w1 512x512 (1 MiB), b1, w2 512x10, b2: reversed, closed at 1 MiB
    assert ctx.buckets == ((5, 4, 3, 2), (1, 0))
    assert all(b == tuple(sorted(b, reverse=True)) for b in ctx.buckets)
    assert sum(len(b) for b in ctx.buckets) == len(ctx.names)


@pytest.mark.parametrize(
    "variant",
    [
        {},
        dict(mode="local", sync_every=2),
        dict(mode="stale", staleness=1),
        dict(mode="stale", staleness=2, compensation=0.5),
        dict(compression="fp16"),
        dict(compression="topk", allreduce="tree"),
        dict(fuse=True),
        dict(fuse=True, prefetch=2),
        dict(fuse=True, direct_mb=0.0),
    ],
    ids=str,
)
def test_the_cost_only_graph_has_the_executable_graphs_structure(digits, variant):
    spec = TorchTraining(CNN, digits, workers=3, batch=63, iterations=3, bucket_mb=0.01, **variant)
    for epoch in (0, 1):
        real, costs = spec.graph(epoch), spec.graph(epoch, executable=False)
        assert real.executable and not costs.executable
        assert list(real.ids) == list(costs.ids)
        assert sorted(map(tuple, real.edges())) == sorted(map(tuple, costs.edges()))
        costs.validate()  # no duplicate edge, no cycle
        # no dead work: every task leads to a rank's final state (or the evaluation)
        sinks = {t for t in costs.ids if not list(costs.successors(t))}
        assert sinks <= {*spec.final_tasks(epoch), f"e{epoch}.eval"}, sorted(sinks)[:5]
    if variant:
        return
    trace = taskflow.simulate(spec.graph(0, executable=False), taskflow.Cluster.homogeneous(3, bandwidth=1e9), "placed")
    sched = trace.to_schedule()
    assert {sched.assignment(f"it1.w{r}.update").worker for r in range(3)} == {"w0", "w1", "w2"}


# ----------------------------------------------------------------------------- equal to the plain loop
@pytest.mark.parametrize("allreduce, shares", [("ring", None), ("tree", None), ("ps", None), ("ring", (3, 1))])
def test_every_rank_ends_with_the_single_process_loops_parameters(client, digits, allreduce, shares):
    spec = TorchTraining(
        CNN, digits, workers=2, batch=64, shares=shares, allreduce=allreduce, iterations=6, bucket_mb=0.02
    )
    assert len(spec.ctx.buckets) >= 2
    rep = taskflow.run(spec.graph(0), "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, losses = spec.reference(1)
    for t in spec.final_tasks(0):
        assert rel_err(rep.results[t], ref) < 1e-5
    # each rank's log holds its micro-batch losses; weighted, they are the global batch's loss
    logs = [rep.results[t]["log"] for t in spec.final_tasks(0)]
    glob = [sum(lg[i][1] * lg[i][2] for lg in logs) / 64 for i in range(6)]
    assert np.allclose(glob, losses, rtol=1e-5)
    assert set(rep.results) == set(spec.final_tasks(0))  # only the final states came back


@pytest.mark.parametrize(
    "fuse, prefetch, shares, direct_mb",
    [(True, 0, None, 4.0), (True, 1, (3, 1), 4.0), (True, 3, None, 4.0), (True, 1, None, 0.0), (True, 0, (3, 1), 0.0)],
)
def test_a_fused_graph_ends_with_the_same_parameters_in_fewer_tasks(client, digits, fuse, prefetch, shares, direct_mb):
    """Loading in one task run ahead by ``prefetch``, the gradient summed by the updates (or, with
    ``direct_mb=0``, reduced by the ring as unfused): the plain loop's parameters, fewer tasks."""
    kw = dict(workers=2, batch=64, shares=shares, iterations=6, bucket_mb=0.02)
    spec = TorchTraining(CNN, digits, fuse=fuse, prefetch=prefetch, direct_mb=direct_mb, **kw)
    g, plain = spec.graph(0), TorchTraining(CNN, digits, **kw).graph(0)
    kinds = {t.meta["category"] for t in g.tasks()}
    assert not kinds & {"read", "decode", "augment", "collate"} and len(g) < len(plain)
    assert ("chunk" in kinds) == (direct_mb == 0.0)
    if prefetch == 0 and direct_mb:  # a rank's whole chain is one task an iteration
        assert kinds == {"init", "forward-backward", "update", "eval"} and len(g) == 2 * (6 + 2) + 1
    else:  # a batch loads after the step prefetch + 1 iterations before its own
        assert g.predecessors(f"it{prefetch + 2}.w0.load") == ["it1.w0.forward-backward"]
        assert g.predecessors(f"it{prefetch}.w0.load") == []
    rep = taskflow.run(g, "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, losses = spec.reference(1)
    for t in spec.final_tasks(0):
        assert rel_err(rep.results[t], ref) < 1e-5
    logs = [rep.results[t]["log"] for t in spec.final_tasks(0)]
    assert np.allclose([sum(lg[i][1] * lg[i][2] for lg in logs) / 64 for i in range(6)], losses, rtol=1e-5)


VARIANTS = [
    dict(mode="local", sync_every=3),
    dict(mode="local", sync_every=2, shares=(3, 1)),
    dict(mode="stale", staleness=2),
    dict(mode="stale", staleness=2, compensation=0.5),
    dict(compression="fp16"),
    dict(compression="topk", topk_ratio=0.05),
    dict(mode="stale", staleness=1, compression="topk", topk_ratio=0.1, allreduce="tree"),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()))
def test_each_variant_equals_its_own_sequential_reference(client, digits, variant):
    spec = TorchTraining(CNN, digits, workers=2, batch=64, iterations=7, bucket_mb=0.02, **variant)
    rep = taskflow.run(spec.graph(0), "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    params, losses = spec.reference(1)
    for r, t in enumerate(spec.final_tasks(0)):
        assert rel_err(rep.results[t], {"params": params[r]}) < 1e-5
    logs = [rep.results[t]["log"] for t in spec.final_tasks(0)]
    assert np.allclose([sum(lg[i][1] * lg[i][2] for lg in logs) / 64 for i in range(7)], losses, rtol=1e-5)
    if spec.mode == "local":  # 7 iterations, the last sync after the 6th: the ranks' models differ again
        assert rel_err(rep.results[spec.final_tasks(0)[0]], rep.results[spec.final_tasks(0)[1]]) > 1e-4


def test_the_variants_change_what_is_computed_and_what_moves(digits):
    base = TorchTraining(CNN, digits, workers=2, batch=64, iterations=6, bucket_mb=0.02)
    plain, _ = base.reference(1)
    for kw in VARIANTS:
        params, _ = TorchTraining(CNN, digits, workers=2, batch=64, iterations=6, bucket_mb=0.02, **kw).reference(1)
        assert rel_err({"params": params[0]}, plain) > 1e-6, kw
    stale, _ = TorchTraining(CNN, digits, workers=2, batch=64, iterations=6, mode="stale", staleness=2).reference(1)
    comp, _ = TorchTraining(
        CNN, digits, workers=2, batch=64, iterations=6, mode="stale", staleness=2, compensation=50.0
    ).reference(1)
    assert rel_err({"params": comp[0]}, {"params": stale[0]}) > 1e-7  # the compensation term acts
    sync0, _ = TorchTraining(CNN, digits, workers=2, batch=64, iterations=6, mode="stale", staleness=0).reference(1)
    assert rel_err({"params": sync0[0]}, plain) < 1e-5  # staleness 0 is synchronous training
    g = TorchTraining(CNN, digits, workers=2, batch=64, iterations=2, compression="topk", topk_ratio=0.05).graph(0)
    sent = [g.edge_size("it0.w0.compress0", "it0.b0.gather.w1")]
    assert sent == [12.0 * round(0.05 * 9930)]  # an index and a value per entry kept
    g16 = TorchTraining(CNN, digits, workers=2, batch=64, iterations=2, compression="fp16").graph(0)
    assert g16.edge_size("it0.b0.chunk.w0", "it0.b0.rs0.w0") == 4 * 9930 / 2 / 2  # half a chunk of halves
    with pytest.raises(WorkflowError, match="compression applies to gradients"):
        TorchTraining(CNN, digits, mode="local", sync_every=2, compression="fp16")
    prio = TorchTraining(CNN, digits, workers=2, batch=64, iterations=1, bucket_mb=0.02, priority="layer-order")
    pg = prio.graph(0)
    first = min(range(len(prio.ctx.buckets)), key=lambda j: min(prio.ctx.buckets[j]))  # holds layer 0
    spread = {j: pg.task(f"it0.b{j}.ag0.w0").meta["priority"] for j in range(len(prio.ctx.buckets))}
    assert spread[first] == max(spread.values()) == len(prio.ctx.buckets)


def test_only_allreduce_chunks_cross_the_network_under_placed(client, digits):
    spec = TorchTraining(CNN, digits, workers=2, batch=64, allreduce="ring", iterations=4)
    g = spec.graph(0)
    rep = taskflow.run(g, "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    moved = {g.task(t.task).meta["category"] for t in rep.trace.transfers}
    assert moved <= {"chunk", "ring-reduce-scatter", "ring-all-gather"}
    bucket = 4 * spec.params()
    per_it = sum(t.bytes for t in rep.trace.transfers) / 4
    # a ring sends 2 (N - 1) / N of the bucket from each rank: 2 (N - 1) buckets over N = 2 ranks
    assert 2 * bucket <= per_it <= 2.1 * bucket


def test_train_learns_and_reports_each_epoch(client, digits, tmp_path):
    h = taskflow.train(CNN, digits, epochs=2, workers=2, batch=64, client=client, quiet=True, plot=tmp_path / "acc.png")
    assert [e["epoch"] for e in h.epochs] == [0, 1]
    assert h.epochs[1]["loss"] < h.epochs[0]["loss"] < 2.3
    assert h.final_accuracy > 0.5  # chance is 0.1
    assert len(h.losses) == 2 * (1438 // 64)
    e = h.epochs[1]
    params = h.config["parameters"]
    assert e["samples_per_second"] > 0 and e["state_bytes"] == 2 * 4 * params  # parameters and momentum
    # fused under placed: each rank's step output (its gradient and the state it started from) goes
    # to the other rank, once an iteration
    assert e["bytes_per_iteration"] == pytest.approx(2 * (4 + 8) * params, rel=0.1)
    ring = taskflow.train(
        CNN, digits, epochs=1, workers=2, batch=64, client=client, quiet=True, fuse=False, iterations=4
    )
    assert ring.epochs[0]["bytes_per_iteration"] == pytest.approx(2 * 4 * params, rel=0.05)  # the chunks alone
    # where an iteration's time went: four parts that add up to the epoch's seconds per iteration,
    # loading measured inside the fused task as in the unfused loading tasks
    for hist in (h, ring):
        b, e = hist.breakdown(), hist.epochs[-1]
        assert min(b.compute, b.loading, b.communication, b.waiting) >= 0 and b.compute > 0 and b.loading > 0
        assert b.compute + b.loading + b.communication + b.waiting == pytest.approx(e["seconds"] / e["iterations"])
        assert "ms/iteration: compute " in hist.lines()[-1] and " kB moved per iteration" in hist.lines()[-1]
    assert (tmp_path / "acc.png").read_bytes()[:4] == b"\x89PNG"
    assert "held-out accuracy" in h.lines()[1]


def test_a_loss_that_is_nan_stops_the_run_naming_its_iteration(client, digits):
    with pytest.raises(taskflow.TaskFailed, match=r"iteration 0, rank \d: the loss is nan") as e:
        taskflow.train(
            CNN, digits, loss=nan_loss, epochs=1, workers=2, batch=64, iterations=2, client=client, quiet=True
        )
    assert e.value.task.startswith("it0.") and e.value.task.endswith(".forward-backward")


# ----------------------------------------------------------------------------- checkpoints and failures
def test_a_resumed_run_ends_where_an_uninterrupted_one_does(client, digits, tmp_path):
    kw = dict(workers=2, batch=64, iterations=4, client=client, quiet=True, checkpoint=tmp_path / "ck.pt")
    first = taskflow.train(CNN, digits, epochs=1, **kw)
    assert first.resumed_from is None and (tmp_path / "ck.pt").exists()
    resumed = taskflow.train(CNN, digits, epochs=3, **kw)
    assert resumed.resumed_from == 0 and [e["epoch"] for e in resumed.epochs] == [0, 1, 2]
    spec = TorchTraining(CNN, digits, workers=2, batch=64, iterations=4)
    ref, losses = spec.reference(3)
    assert all(rel_err(s, ref) < 1e-5 for s in resumed.states)
    assert np.allclose([v for _, v in resumed.losses], losses, rtol=1e-5)
    with pytest.raises(TaskflowError, match="written by another job .*batch"):
        taskflow.train(CNN, digits, epochs=4, **dict(kw, batch=32))
    notes = tmp_path / "notes.txt"
    notes.write_text("a file of the user's")
    with pytest.raises(TaskflowError, match="is not a taskflow training checkpoint"):
        taskflow.train(CNN, digits, epochs=1, **dict(kw, checkpoint=notes))
    assert notes.read_text() == "a file of the user's"
    with pytest.raises(TaskflowError, match=r"\.txt is not an image format"):
        taskflow.train(CNN, digits, epochs=1, plot=tmp_path / "acc.txt", **kw)


def test_a_killed_worker_is_survived_with_the_same_parameters(digits):
    spec = TorchTraining(CNN, digits, workers=2, batch=64, iterations=20)
    with (
        LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        pids = c.run(os.getpid)
        c.run(lambda: __import__("torch"))  # every worker has torch loaded: the kill lands mid-epoch
        names = {a: w["name"] for a, w in c.scheduler_info()["workers"].items()}
        victim = next(a for a, n in names.items() if str(n) == "1")  # where placed puts rank 1
        killed = []

        def kill():  # once the victim computes a rank's step of the third iteration or later
            t0 = time.time()
            while time.time() - t0 < 60:
                try:
                    busy = c.processing(victim).get(victim, ())
                except Exception:  # noqa: BLE001 - the run is over, the client closed
                    return
                if any(
                    "forward-backward-it" in k and not k.split("-it", 1)[1].startswith(("0.", "1."))
                    for k in map(str, busy)
                ):
                    os.kill(pids[victim], signal.SIGKILL)
                    killed.append(time.time())
                    return
                time.sleep(0.005)

        threading.Thread(target=kill, daemon=True).start()
        rep = taskflow.run(spec.graph(0), "placed", client=c, quiet=True, keep=spec.final_tasks(0), timeout=120)
    ref, _ = spec.reference(1)
    assert killed and rep.replans >= 1
    assert all(rel_err(rep.results[t], ref) < 1e-5 for t in spec.final_tasks(0))


def test_a_killed_training_command_resumes_from_its_checkpoint(digits, tmp_path):
    ck, report = tmp_path / "ck.pt", tmp_path / "h.json"
    cmd = [
        sys.executable,
        "-m",
        "taskflow",
        "train",
        str(digits),
        "--epochs",
        "3",
        "--iterations",
        "3",
        "--checkpoint",
        str(ck),
        "--report",
        str(report),
        "-q",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while not ck.exists() and proc.poll() is None and time.time() - t0 < 120:
            time.sleep(0.02)
        assert ck.exists(), "no checkpoint was written"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "resumed after epoch" in done.stdout
    hist = json.loads(report.read_text())
    assert [e["epoch"] for e in hist["epochs"]] == [0, 1, 2] and hist["resumed_from"] in (0, 1)
    spec = TorchTraining(
        functools.partial(small_cnn, in_channels=1, classes=10, side=8),
        digits,
        workers=2,
        batch=64,
        iterations=3,
        optimizer=functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9),
    )
    ref, losses = spec.reference(3)
    final = torch.load(ck, weights_only=False)["states"]
    assert all(rel_err(s, ref) < 1e-5 for s in final)
    assert np.allclose([v for _, v in hist["losses"]], losses, rtol=1e-5)


def test_the_command_line_reports_and_refuses_bad_input(digits, tmp_path, capsys, client):
    from taskflow.app.cli import main

    assert main(["train", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", str(digits), "--batch", "63"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "batch 63 is not divisible by 2 workers" in err and err.count("\n") == 1
    assert main(["train", str(digits), "--model", "nosuchmodule:f"]) == 2
    assert "--model nosuchmodule:f: cannot load" in capsys.readouterr().err
    for argv, said in (
        (["--sync-every", "2"], "--sync-every goes with --mode local"),
        (["--staleness", "1"], "--staleness goes with --mode stale"),
        (["--topk-ratio", "0.1", "--compression", "fp16"], "--topk-ratio goes with --compression topk"),
        (["--pipeline", "gpipe"], "--pipeline goes with --stages"),
        (["--stages", "2", "--mode", "local"], "--stages (pipeline parallelism) goes without"),
    ):
        assert main(["train", str(digits), *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
    rc = main(
        [
            "train",
            str(tmp_path / "syn"),
            "--make-data",
            "synthetic",
            "--model",
            "resnet8",
            "--epochs",
            "1",
            "--iterations",
            "2",
            "--batch",
            "16",
            "--report",
            str(tmp_path / "r.json"),
            "--profile",
            str(tmp_path / "p.json"),
            "--cost-graph",
            str(tmp_path / "g.json"),
            "--address",  # the module's cluster (the embedded one is the other tests')
            client.scheduler.address,
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "wrote the synthetic dataset" in out and "resnet8:" in out and "epoch 1: loss" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["config"]["model"] == "resnet8" and doc["epochs"][0]["iterations"] == 2
    # the profiled job, planned by the advisor: the epoch's graph with the costs the run measured
    g = taskflow.load_graph(tmp_path / "g.json")
    assert not g.executable and {t.meta["category"] for t in g.tasks()} >= {"forward-backward", "update"}  # fused
    assert main(["advise", str(tmp_path / "g.json"), "--profile", str(tmp_path / "p.json"), "--catalog", "tiny"]) == 0
    assert "Pareto front" in capsys.readouterr().out
    assert (
        main(
            [
                "advise",
                "--train",
                str(tmp_path / "g.json"),
                "--profile",
                str(tmp_path / "p.json"),
                "--catalog",
                "tiny",
                "-q",
            ]
        )
        == 0
    )
    assert "no deadline or budget given" in capsys.readouterr().out
    assert main(["advise", "--train", str(tmp_path / "g.json"), "--catalog", "tiny"]) == 2
    assert "goes with the costs its run measured: --profile FILE" in capsys.readouterr().err


def test_the_demo_trains_a_real_model_after_the_mlp(tmp_path, capsys):
    from taskflow.app.demo import main as demo

    assert demo(out=tmp_path / "out", iterations=3, bench=False) == 0
    out = capsys.readouterr().out
    assert "real training (PyTorch): a 9,930-parameter CNN" in out
    assert out.count("  epoch ") == 2 and "held-out accuracy" in out
    assert (tmp_path / "out" / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert len(ImageFolder(tmp_path / "out" / "digits", "train")) == 1438


# ----------------------------------------------------------------------------- pipeline parallelism
@pytest.mark.parametrize("schedule, stages, microbatches", [("gpipe", 2, 4), ("1f1b", 3, 3)])
def test_a_pipeline_equals_the_plain_loop_and_moves_activations_between_stages(
    client, digits, schedule, stages, microbatches
):
    from workflows.torch_pipeline import TorchPipeline

    spec = TorchPipeline(
        CNN, digits, stages=stages, microbatches=microbatches, schedule=schedule, batch=64, iterations=3
    )
    g = spec.graph(0)
    rep = taskflow.run(g, "placed" if stages == 2 else "heft", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, losses = spec.reference(1)
    got = [p for t in spec.final_tasks(0) for p in rep.results[t]["params"]]
    assert rel_err({"params": got}, ref) < 1e-5
    assert np.allclose([x[1] for x in rep.results[spec.final_tasks(0)[-1]]["log"]], losses, rtol=1e-5)
    finals = set(spec.final_tasks(0))
    moved = {g.task(t.task).meta["category"] for t in rep.trace.transfers if t.task not in finals}
    if stages == 2:  # placed: stage s on worker s; what crosses is activations and their gradients (and the
        # stages' final states, to the held-out evaluation)
        assert moved <= {"forward", "dx"} and {"forward", "dx"} <= moved
        act = sum(t.bytes for t in rep.trace.transfers if g.task(t.task).meta["category"] == "forward")
        assert act >= 3 * microbatches * 16 * 512 * 4  # a 16-sample microbatch's 512 floats, per iteration
    # each stage's ops run in its schedule's order
    from workflows.pipeline import pipeline_order

    for s in range(stages):
        ops = pipeline_order(schedule, s, stages, microbatches)
        for (k1, m1), (k2, m2) in zip(ops, ops[1:]):
            assert g.has_edge(f"it0.s{s}.{k1}{m1}", f"it0.s{s}.{k2}{m2}")


def test_pipeline_jobs_refuse_what_they_cannot_cut(digits):
    from workflows.torch_models import resnet8
    from workflows.torch_pipeline import TorchPipeline

    with pytest.raises(WorkflowError, match="cuts a torch.nn.Sequential"):
        TorchPipeline(functools.partial(resnet8), digits)
    with pytest.raises(WorkflowError, match="at most one stage per child"):
        TorchPipeline(CNN, digits, stages=9)
    with pytest.raises(WorkflowError, match="cuts must rise from 0 to 7"):
        TorchPipeline(CNN, digits, stages=2, cuts=(0, 7, 7))
    with pytest.raises(WorkflowError, match="schedule must be"):
        TorchPipeline(CNN, digits, schedule="zero-bubble")
    with pytest.raises(TaskflowError, match="takes no shares, mode or compression"):
        taskflow.train(CNN, digits, stages=2, compression="fp16")


@pytest.mark.slow  # pipelines themselves run in make test (the API's); the command line's in make test-all
def test_train_runs_a_pipeline_from_the_command_line(digits, tmp_path, capsys):
    from taskflow.app.cli import main

    rc = main(
        [
            "train",
            str(digits),
            "--stages",
            "2",
            "--microbatches",
            "4",
            "--pipeline",
            "gpipe",
            "--epochs",
            "2",
            "--iterations",
            "6",
            "--report",
            str(tmp_path / "r.json"),
            "--checkpoint",
            str(tmp_path / "ck.pt"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "in 2 stages, one worker each; 4 microbatches of 16/16/16/16 samples, gpipe" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["epochs"][1]["loss"] < doc["epochs"][0]["loss"] and doc["epochs"][1]["bytes_per_iteration"] > 0
    rc = main(
        [
            "train",
            str(digits),
            "--stages",
            "2",
            "--microbatches",
            "4",
            "--pipeline",
            "gpipe",
            "--epochs",
            "3",
            "--iterations",
            "6",
            "--checkpoint",
            str(tmp_path / "ck.pt"),
            "-q",
        ]
    )
    assert rc == 0 and "resumed after epoch 2" in capsys.readouterr().out


def test_train_under_several_schedulers_computes_the_same_and_reports_each(digits, tmp_path, capsys, monkeypatch):
    from taskflow.app.cli import main
    from taskflow.runtime.client import connecting

    started, start = [], connecting.local_cluster
    monkeypatch.setattr(connecting, "local_cluster", lambda *a, **k: started.append(a) or start(*a, **k))

    rc = main(
        [
            "train",
            str(digits),
            "--iterations",
            "3",
            "--scheduler",
            "placed,heft",
            "--report",
            str(tmp_path / "r.json"),
            "--checkpoint",
            str(tmp_path / "ck.pt"),
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and out.count("placed: epoch 1") == 1 and out.count("heft: epoch 1") == 1
    assert len(started) == 1  # one embedded cluster for both runs
    docs = json.loads((tmp_path / "r.json").read_text())
    assert [d["config"]["scheduler"] for d in docs] == ["placed", "heft"]
    assert docs[0]["losses"] == docs[1]["losses"]  # the same training, placed differently
    assert (tmp_path / "ck.placed.pt").exists() and (tmp_path / "ck.heft.pt").exists()


def test_repeated_runs_each_equal_their_seeds_reference_and_are_summarised(client, digits, tmp_path):
    from taskflow.training.repeats import plot, repeat, table

    seen = []
    r = repeat(
        CNN,
        digits,
        n=2,
        seed=5,
        epochs=2,
        iterations=3,
        batch=64,
        client=client,
        quiet=True,
        on_run=lambda k, seed, h: seen.append((k, seed, len(h.epochs))),
    )
    assert r.seeds == [5, 6] and seen == [(0, 5, 2), (1, 6, 2)]
    for h, seed in zip(r.histories, r.seeds):
        ref, _ = TorchTraining(CNN, digits, batch=64, iterations=3, seed=seed).reference(2)
        assert rel_err(h.states[0], ref) < 1e-5  # each run is its seed's job, exactly
    assert rel_err(r.histories[0].states[0], r.histories[1].states[0]) > 1e-3  # and the seeds differ
    for figure, s in r.summary().items():
        assert s["low"] <= s["median"] <= s["high"], figure
    assert "2 runs (seeds 5, 6)" in r.line() and r.name in table([r])
    plot([r], tmp_path / "runs.png")
    assert (tmp_path / "runs.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(TaskflowError, match="repeated runs take no checkpoint"):
        repeat(CNN, digits, n=2, checkpoint=tmp_path / "c.pt")


def test_train_repeat_prints_each_run_and_one_table(digits, tmp_path, capsys, client):
    from taskflow.app.cli import main

    out, png = tmp_path / "runs.json", tmp_path / "runs.png"
    assert (
        main(
            [
                "train",
                str(digits),
                "--repeat",
                "2",
                "--epochs",
                "1",
                "--iterations",
                "2",
                "-q",
                "-o",
                str(out),
                "--plot",
                str(png),
                "--address",  # the module's cluster (several schedulers' runs on one embedded: the test above)
                client.scheduler.address,
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "placed: run 1 (seed 0): epoch 1:" in text and "placed: run 2 (seed 1): epoch 1:" in text
    assert "samples/s" in text and "(the median of the runs" in text
    doc = json.loads(out.read_text())
    assert [g["seeds"] for g in doc] == [[0, 1]] and len(doc[0]["runs"]) == 2
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("bad", [{"loaders": "x"}, {"workers": -1}, {"workers": 2.5}, {"threads": True}])
def test_repeats_with_counts_train_refuses_say_so_before_any_cluster_starts(digits, no_cluster, bad):
    from taskflow.training.repeats import repeat

    with pytest.raises(TaskflowError):
        repeat(CNN, digits, n=2, iterations=1, quiet=True, **bad)
