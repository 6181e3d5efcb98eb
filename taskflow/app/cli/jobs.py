"""``taskflow jobs``: a shared cluster's job schedulers on a trace of jobs.

``taskflow jobs simulate TRACE`` simulates each ``--scheduler`` on the trace (native JSON or
Tiresias' CSV) and prints one table; ``taskflow jobs run TRACE --data DIR`` runs the trace's real
training jobs under each on one Dask cluster, and the simulator's prediction of them beside;
``taskflow jobs generate TRACE`` writes a seeded trace there."""

from __future__ import annotations

import json

from ...errors import UsageError
from ...formats import atomic_write
from ...jobscheduling import PLACEMENTS
from .commands import command
from .options import (
    COUNT,
    SECONDS,
    add_existing,
    add_jobqueue,
    jobqueue_options,
    add_option,
    add_output,
    add_plot,
    add_quiet,
    add_scheduler,
    add_seed,
    check_outputs,
    number,
)

__all__ = ["jobs", "add_arguments", "worker_line"]

DEFAULT = "fifo,sjf,srtf,las,gittins"


def add_arguments(sp) -> None:
    """The ``jobs`` subcommand's arguments.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument(
        "action",
        choices=("simulate", "run", "generate"),
        help="simulate: each job scheduler on TRACE; run: TRACE's real training jobs on a Dask cluster "
        "under each, beside the simulator's prediction; generate: write a seeded trace to TRACE",
    )
    sp.add_argument("trace", metavar="TRACE", help="a job trace: the native JSON, or Tiresias' CSV (.csv)")
    add_option(
        sp,
        "--cluster",
        help="the shared cluster: Tiresias' cluster spec CSV, or JSON "
        "{racks, nodes_per_rack, workers_per_node} (default: the trace's own); run: a cluster file "
        "naming each Dask worker's rack and the uplink (default inside the testbed: its own)",
    )
    add_option(
        sp,
        "--workers",
        help="instead of --cluster: this many workers, in nodes of 8 (run: the embedded "
        "cluster's worker processes, default 4)",
    )
    add_scheduler(
        sp, default=DEFAULT, which="a job scheduler of 'taskflow jobs' (fifo, sjf, srtf, las, gittins, gandiva)"
    )
    sp.add_argument(
        "--restore",
        type=SECONDS,
        default=0.0,
        help="seconds a preempted job spends restoring its checkpoint when it starts again (default 0)",
    )
    sp.add_argument(
        "--round",
        type=SECONDS,
        help="las, gittins, gandiva: seconds between two decisions (a round, a time slice; default 60)",
    )
    sp.add_argument(
        "--thresholds", help="las, gittins: the queues' thresholds in worker-seconds, e.g. 3600,36000 (default 3600)"
    )
    sp.add_argument(
        "--promote",
        type=number(float, above=0.0, high=1e9),
        help="las, gittins: back to the first queue after waiting this many times its last run",
    )
    sp.add_argument(
        "--placement",
        choices=PLACEMENTS,
        help="where a job's workers go: the fewest nodes and racks (consolidated, the default), the most "
        "nodes (spread), the racks whose uplinks carry the fewest jobs (contention-aware), the nodes "
        "where it and its neighbours slow each other least (interference-aware, with --interference)",
    )
    sp.add_argument(
        "--crossover",
        type=number(float, low=0.0, high=0.99),
        metavar="SHARE",
        help="a job that waits may take turns on a running job's workers of its size "
        "(Crossover), each spending SHARE of an iteration communicating while the other computes",
    )
    sp.add_argument(
        "--interference",
        metavar="FILE",
        help="simulate: the slowdowns of jobs sharing a node, a taskflow-interference/1 table (default none)",
    )
    sp.add_argument(
        "--skip-too-large",
        action="store_true",
        help="set aside jobs larger than the cluster (listed) instead of refusing the trace",
    )
    sp.add_argument("--count", type=COUNT, default=1000, help="generate: how many jobs (default 1000)")
    sp.add_argument(
        "--load",
        type=number(float, above=0.0, high=100.0),
        default=0.9,
        help="generate: the offered load, a share of the cluster's workers (default 0.9)",
    )
    sp.add_argument("--arrivals", choices=("poisson", "diurnal"), default="poisson", help="generate (default poisson)")
    sp.add_argument(
        "--models",
        help="generate: what the jobs train, drawn evenly from a comma list, e.g. "
        "resnet50,vgg16,bert-base (the library's models are timed on shared uplinks; default none)",
    )
    sp.add_argument("--data", metavar="DIR", help="run: the jobs' dataset folder (train/ and val/ class folders)")
    add_option(sp, "--make-data", help="run: first write --data if it is missing")
    add_existing(sp, "run: ")
    add_jobqueue(sp, "run: ")
    sp.add_argument(
        "--epoch-iterations",
        type=COUNT,
        default=4,
        help="run: iterations between two checkpoints, where a preempted job stops (default 4)",
    )
    add_option(sp, "--batch", default=32, help="run: samples per iteration of a job naming none (default 32)")
    sp.add_argument("--no-predict", action="store_true", help="run: no profile, no simulated prediction")
    add_option(
        sp,
        "--repeat",
        default=1,
        help="run: runs per job scheduler, their order turned each time; the tables give each job's median (default 1)",
    )
    add_option(sp, "--timeout", help="run: seconds each scheduler's run may take")
    add_output(sp, "simulate, run: every run (JSON: the metrics and each job's runs)")
    add_plot(sp, "simulate: the completion times' CDF and the busy workers over time")
    add_seed(sp)
    add_quiet(sp)


def _cluster(args):
    from ...jobs import JobCluster, load_job_cluster

    if args.cluster and args.workers:
        raise UsageError("--cluster and --workers name the cluster twice: give one")
    if args.cluster:
        return load_job_cluster(args.cluster)
    if args.workers:
        per = 8 if args.workers % 8 == 0 else args.workers
        return JobCluster(1, args.workers // per, per, name=f"{args.workers} workers")
    return None


def _options(args, names) -> dict:
    opts = {"placement": args.placement} if args.placement else {}
    if args.crossover is not None:
        opts["crossover"] = args.crossover
    given = {"--thresholds": args.thresholds, "--promote": args.promote}
    if any(v is not None for v in given.values()) and not {"las", "gittins"} & set(names):
        raise UsageError(f"{', '.join(k for k, v in given.items() if v is not None)} go with las or gittins")
    if args.round is not None and not {"las", "gittins", "gandiva"} & set(names):
        raise UsageError("--round goes with las, gittins or gandiva")
    if args.thresholds is not None:
        from ...checks import decimal

        try:
            opts["thresholds"] = tuple(decimal(x.strip()) for x in args.thresholds.split(","))
        except ValueError:
            raise UsageError(
                f"--thresholds {args.thresholds!r}: expected worker-seconds separated by commas, e.g. 3600,36000"
            ) from None
    opts.update({k: v for k, v in (("round", args.round), ("promote", args.promote)) if v is not None})
    return opts


@command(
    "Simulate job schedulers on a trace of training jobs arriving on a shared cluster (one table of "
    "completion times, queueing, utilization, fairness, preemptions), or generate a seeded trace."
)
def jobs(args) -> int:
    from ...jobs import generate_trace, load_trace, save_trace
    from ...jobscheduling import get_job_scheduler

    if args.action == "run":
        return _run(args)
    for flag, given in (
        ("--jobqueue", args.jobqueue),
        ("--address", args.address),
        ("--scheduler-file", args.scheduler_file),
        ("--data", args.data),
    ):
        if given:
            raise UsageError(f"{flag} goes with run (the real jobs on a Dask cluster), not {args.action}")
    if args.action == "generate":
        check_outputs([("TRACE", args.trace)])
        cluster = _cluster(args)
        if cluster is None:
            raise UsageError("generate needs the cluster the trace is for: --cluster FILE or --workers N")
        models = tuple(m.strip() for m in (args.models or "").split(",") if m.strip())
        trace = generate_trace(args.count, args.seed, cluster, load=args.load, arrivals=args.arrivals, models=models)
        save_trace(trace, args.trace)
        if not args.quiet:
            print(f"wrote {len(trace):,} jobs to {args.trace} ({trace.name}, for {cluster.workers} workers)")
        return 0
    from ..jobs import compare_jobs, jobs_table, plot_jobs

    check_outputs([("--output", args.output), ("--plot", args.plot)], [args.trace, args.cluster, args.interference])
    names = [n.strip().lower() for n in args.scheduler.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--scheduler {args.scheduler!r}: name one or more job schedulers")
    for n in names:
        get_job_scheduler(n)  # an unknown name before any work
    trace = load_trace(args.trace)
    cluster = _cluster(args) or trace.cluster
    if cluster is None:
        raise UsageError(f"{args.trace} names no cluster: give --cluster FILE or --workers N")
    from ...runtime.client.waiting import progress_bar

    interference = _interference(args.interference)
    network = None
    if cluster.uplink:  # jobs spread over racks share their uplinks: timed from their own task graphs
        from ...jobs import JobNetwork
        from ...training.jobnet import graph_iterations

        network = JobNetwork(cluster, graph_iterations(cluster))
    docs: list = []
    said = _said(args, docs, {"trace": trace.name, "cluster": cluster.to_dict()}, "{:,.1f}")
    options = _options(args, names)
    bar = None if args.quiet else progress_bar(len(trace) * len(names), "simulating", unit="job")
    try:
        runs = compare_jobs(
            trace,
            cluster,
            names,
            restore=args.restore,
            skip_too_large=args.skip_too_large,
            on_run=said,
            interference=interference,
            network=network,
            progress=None if bar is None else bar.update,
            **options,
        )
    finally:
        if bar is not None:
            bar.close()
    print(
        f"{trace.name}: {len(trace):,} jobs on {cluster.workers:,} workers ({cluster.racks} x "
        f"{cluster.nodes_per_rack} x {cluster.workers_per_node})"
    )
    print(jobs_table(runs))
    if runs[0].rejected:
        print(
            f"set aside {len(runs[0].rejected)} job(s) larger than the cluster: "
            + ", ".join(j.id for j, _ in runs[0].rejected[:10])
            + (" ..." if len(runs[0].rejected) > 10 else "")
        )
    if args.plot:
        plot_jobs(runs, args.plot)
    return 0


def _interference(path):
    """The interference table at ``path`` (None: none)."""
    if path is None:
        return None
    from ...formats import read_json
    from ...jobs import Interference

    return Interference.from_dict(read_json(path), path)


def _said(args, docs: list, head: dict, seconds: str):
    """What each run says as it ends: a line (times in ``seconds``' format), and ``-o`` rewritten
    with every run so far (a comparison stopped half-way keeps what it ran)."""

    def said(run):
        docs.append(run.to_dict())
        if not args.quiet:
            m = run.metrics()
            print(
                f"{run.scheduler}: {m['jobs']:,} jobs, average JCT {seconds.format(m['avg_jct'])} s, makespan "
                f"{seconds.format(m['makespan'])} s, {m['preemptions']:,} preemptions",
                flush=True,
            )
        if args.output:
            atomic_write(args.output, json.dumps({**head, "runs": docs}, indent=1) + "\n")

    return said


def worker_line(event, names) -> str | None:
    """The line ``jobs run`` says for ``event`` where a worker was lost or joined (None for
    another event): ``names`` are the workers at the start, in the run's order.

    Parameters
    ----------
    event : object
        A job scheduler's event.
    names : list of str
    """
    from ...jobscheduling import WorkerAdded, WorkerLost

    if not isinstance(event, (WorkerLost, WorkerAdded)):
        return None
    w = event.worker
    who = f"worker {names[w]!r}" if w < len(names) else f"worker number {w} (joined)"
    if isinstance(event, WorkerAdded):
        return f"{event.time:.1f} s: {who} {'is back' if w < len(names) else 'is free'}"
    job = f": job {event.job_id!r} stops and waits again" if event.job_id is not None else ""
    return f"{event.time:.1f} s: {who} was lost{job}"


def _racks(args) -> tuple:
    """``(racks, uplink, what to say)`` of ``jobs run``: from ``--cluster``, or inside the testbed
    (its cluster found through ``DASK_SCHEDULER_ADDRESS``) from the testbed's cluster file."""
    import os

    import dask

    from ...errors import TaskflowError
    from ...formats import load_cluster

    path = args.cluster
    if path is None and not (args.address or args.scheduler_file) and dask.config.get("scheduler-address", None):
        path = os.environ.get("TASKFLOW_TESTBED_CLUSTER")
    if path is None:
        return None, None, ""
    try:
        cluster = load_cluster(path)
    except TaskflowError as e:
        raise UsageError(f"--cluster {path}: run takes a cluster file naming each Dask worker's rack ({e})") from None
    if cluster.racks is None:
        raise UsageError(f"--cluster {path}: names no racks (run takes the racks and the uplink of the Dask workers)")
    n = len(set(cluster.racks.values()))
    return cluster.racks, cluster.uplink, f" in {n} racks ({cluster.uplink * 8 / 1e6:g} Mbit/s uplinks)"


def _run(args) -> int:
    """``taskflow jobs run``: the real jobs under each scheduler, the prediction beside."""
    import os

    from ...errors import MissingExtra

    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingExtra("taskflow jobs run needs PyTorch: pip install 'dask-taskflow[torch]'") from None
    from ...jobs import load_trace
    from ...jobscheduling import get_job_scheduler
    from ...runtime.client.connecting import connect
    from ...runtime.client.waiting import close_quietly
    from ..jobs import jobs_table, plot_jobs
    from ..jobs_real import prediction_table, run_real_jobs
    from ...training.jobworkers import workers_of
    from .training import MODELS, model_factory
    from workflows.images import ImageFolder, write_digits, write_synthetic

    if not args.data:
        raise UsageError("run needs the jobs' dataset: --data DIR (with --make-data digits to write one)")
    check_outputs([("--output", args.output), ("--plot", args.plot)], [args.trace, args.data, args.cluster])
    names = [n.strip().lower() for n in args.scheduler.split(",") if n.strip()]
    for n in names:
        get_job_scheduler(n)
    trace = load_trace(args.trace)
    unknown = [j for j in trace.jobs if j.model not in MODELS]
    if unknown:
        raise UsageError(f"job {unknown[0].id!r}: model {unknown[0].model!r} is not one of {', '.join(MODELS)}")
    if args.make_data and not os.path.exists(os.path.join(args.data, "train")):
        (write_digits if args.make_data == "digits" else write_synthetic)(args.data, seed=args.seed)
    first = ImageFolder(args.data, "train")
    models = {m: model_factory(m, first.shape(), len(first.classes)) for m in {j.model for j in trace.jobs}}
    racks, uplink, where = _racks(args)
    jq = jobqueue_options(args)
    c, owned = connect(
        None,
        args.address,
        args.scheduler_file,
        args.workers or 4,
        1,
        work_stealing=False,
        jobqueue=args.jobqueue,
        jobqueue_options=jq,
    )
    docs: list = []
    finished = False  # Ctrl-C or a failure: the embedded cluster is ended at once, not waited for
    try:
        workers = len(c.scheduler_info()["workers"])
        if not args.quiet:
            print(
                f"{trace.name}: {len(trace)} jobs on {workers} Dask workers{where}; "
                f"{'profiling each kind of job, then ' if not args.no_predict else ''}"
                f"running under {', '.join(names)}",
                flush=True,
            )

        said = _said(args, docs, {"trace": trace.name, "workers": workers}, "{:.2f}")
        first = workers_of(c)

        def changed(event):  # a worker lost or joined: one line as it happens
            line = worker_line(event, first)
            if line and not args.quiet:
                print(line, flush=True)

        runs, sim, profile = run_real_jobs(
            trace,
            names,
            models,
            args.data,
            c,
            epoch_iterations=args.epoch_iterations,
            predict=not args.no_predict,
            on_run=said,
            on_event=changed,
            timeout=args.timeout,
            repeat=args.repeat,
            batch=args.batch,
            seed=args.seed,
            racks=racks,
            uplink=uplink,
            **_options(args, names),
        )
        finished = True
    finally:
        close_quietly(owned, now=not finished)
    print(jobs_table(runs))
    if sim is not None:
        print()
        print(prediction_table(runs, sim))
        if args.output:
            atomic_write(
                args.output,
                json.dumps(
                    {
                        "trace": trace.name,
                        "workers": workers,
                        "runs": docs,
                        "simulated": [r.to_dict() for r in sim],
                        "profile": profile.to_dict(),
                    },
                    indent=1,
                )
                + "\n",
            )
    if args.plot:
        plot_jobs(runs, args.plot)
    return 0
