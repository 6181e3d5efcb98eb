"""``taskflow jobs``: a shared cluster's job schedulers on a trace of jobs.

``taskflow jobs simulate TRACE`` simulates each ``--scheduler`` on the trace (native JSON or
Tiresias' CSV) and prints one table; ``taskflow jobs generate TRACE`` writes a seeded trace there."""

from __future__ import annotations

import json

from ...errors import UsageError
from ...formats import atomic_write
from .commands import command
from .options import COUNT, SECONDS, add_output, add_plot, add_quiet, add_seed, check_outputs, number

__all__ = ["jobs", "add_arguments"]

DEFAULT = "fifo,sjf,srtf,las,gittins"


def add_arguments(sp) -> None:
    """The ``jobs`` subcommand's arguments.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("action", choices=("simulate", "generate"),
                    help="simulate: each job scheduler on TRACE; generate: write a seeded trace to TRACE")
    sp.add_argument("trace", metavar="TRACE", help="a job trace: the native JSON, or Tiresias' CSV (.csv)")
    sp.add_argument("--cluster", metavar="FILE", help="the shared cluster: Tiresias' cluster spec CSV, or JSON "
                    "{racks, nodes_per_rack, workers_per_node} (default: the trace's own)")
    sp.add_argument("--workers", type=COUNT, help="instead of --cluster: this many workers, in nodes of 8")
    sp.add_argument("--scheduler", default=DEFAULT, help=f"job schedulers, a comma list (default {DEFAULT})")
    sp.add_argument("--restore", type=SECONDS, default=0.0,
                    help="seconds a preempted job spends restoring its checkpoint when it starts again (default 0)")
    sp.add_argument("--round", type=SECONDS, help="las, gittins: seconds between two decisions (default 60)")
    sp.add_argument("--thresholds", help="las, gittins: the queues' thresholds in worker-seconds, e.g. 3600,36000 "
                    "(default 3600)")
    sp.add_argument("--promote", type=number(float, above=0.0, high=1e9),
                    help="las, gittins: back to the first queue after waiting this many times its last run")
    sp.add_argument("--placement", choices=("consolidated", "spread"), default="consolidated",
                    help="fewest nodes per job, or the most (default consolidated)")
    sp.add_argument("--skip-too-large", action="store_true",
                    help="set aside jobs larger than the cluster (listed) instead of refusing the trace")
    sp.add_argument("--jobs", type=COUNT, default=1000, help="generate: jobs (default 1000)")
    sp.add_argument("--load", type=number(float, above=0.0, high=100.0), default=0.9,
                    help="generate: the offered load, a share of the cluster's workers (default 0.9)")
    sp.add_argument("--arrivals", choices=("poisson", "diurnal"), default="poisson", help="generate (default poisson)")
    add_output(sp, "simulate: every run (JSON: the metrics and each job's runs)")
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
    opts = {"placement": args.placement}
    given = {"--round": args.round, "--thresholds": args.thresholds, "--promote": args.promote}
    if any(v is not None for v in given.values()) and not {"las", "gittins"} & set(names):
        raise UsageError(f"{', '.join(k for k, v in given.items() if v is not None)} go with las or gittins")
    if args.thresholds is not None:
        from ...checks import decimal

        try:
            opts["thresholds"] = tuple(decimal(x.strip()) for x in args.thresholds.split(","))
        except ValueError:
            raise UsageError(f"--thresholds {args.thresholds!r}: expected worker-seconds separated by commas, e.g. "
                             f"3600,36000") from None
    opts.update({k: v for k, v in (("round", args.round), ("promote", args.promote)) if v is not None})
    return opts


@command("Simulate job schedulers on a trace of training jobs arriving on a shared cluster (one table of "
         "completion times, queueing, utilization, fairness, preemptions), or generate a seeded trace.")
def jobs(args) -> int:
    from ...jobs import generate_trace, load_trace, save_trace
    from ...jobscheduling import get_job_scheduler

    if args.action == "generate":
        check_outputs([("TRACE", args.trace)])
        cluster = _cluster(args)
        if cluster is None:
            raise UsageError("generate needs the cluster the trace is for: --cluster FILE or --workers N")
        trace = generate_trace(args.jobs, args.seed, cluster, load=args.load, arrivals=args.arrivals)
        save_trace(trace, args.trace)
        if not args.quiet:
            print(f"wrote {len(trace):,} jobs to {args.trace} ({trace.name}, for {cluster.workers} workers)")
        return 0
    from ..jobs import compare_jobs, jobs_table, plot_jobs

    check_outputs([("--output", args.output), ("--plot", args.plot)], [args.trace, args.cluster])
    names = [n.strip().lower() for n in args.scheduler.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--scheduler {args.scheduler!r}: name one or more job schedulers")
    for n in names:
        get_job_scheduler(n)  # an unknown name before any work
    trace = load_trace(args.trace)
    cluster = _cluster(args) or trace.cluster
    if cluster is None:
        raise UsageError(f"{args.trace} names no cluster: give --cluster FILE or --workers N")
    docs = []

    def said(run):
        docs.append(run.to_dict())
        if not args.quiet:
            m = run.metrics()
            print(f"{run.scheduler}: {m['jobs']:,} jobs, average JCT {m['avg_jct']:,.1f} s, makespan "
                  f"{m['makespan']:,.1f} s, {m['preemptions']:,} preemptions", flush=True)
        if args.output:  # as the runs go: a comparison stopped half-way keeps what it simulated
            atomic_write(args.output, json.dumps({"trace": trace.name, "cluster": cluster.to_dict(), "runs": docs},
                                                 indent=1) + "\n")
    runs = compare_jobs(trace, cluster, names, restore=args.restore, skip_too_large=args.skip_too_large,
                        on_run=said, **_options(args, names))
    print(f"{trace.name}: {len(trace):,} jobs on {cluster.workers:,} workers ({cluster.racks} x {cluster.nodes_per_rack}"
          f" x {cluster.workers_per_node})")
    print(jobs_table(runs))
    if runs[0].rejected:
        print(f"set aside {len(runs[0].rejected)} job(s) larger than the cluster: "
              + ", ".join(j.id for j, _ in runs[0].rejected[:10]) + (" ..." if len(runs[0].rejected) > 10 else ""))
    if args.plot:
        plot_jobs(runs, args.plot)
    return 0
