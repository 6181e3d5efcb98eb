"""``adaptive``: HEFT where it is predicted to beat Dask's own scheduling, Dask's own scheduling
on the workers that pay where a slow worker or a narrow link would lengthen the run, Dask's own
scheduling everywhere else; decided again as a run's durations are learned, and by the measured
runs of the same work. The default of
``taskflow.use`` and ``taskflow.compute``.

Planned alone (``taskflow schedule``, ``taskflow.plan``), it is HEFT (Topcuoglu, Hariri, Wu 2002):
the same plan (above :data:`APPEND_PAIRS` tasks x workers, ``heft-append``'s: no gap search).
Simulated (``taskflow.simulate``, ``taskflow simulate``, ``compare``), it runs its own decisions:
the decision core the plugin drives (:mod:`taskflow.runtime.decide`), fed the graph and the cluster
(:mod:`taskflow.runtime.simulated`).
Inside Dask's scheduler (the taskflow plugin) the plan charges each transfer to the
CPU of both ends (:mod:`schedulers._transfer_cpu`: a Dask worker's event loop serves and fetches
inputs on the cores its tasks run on), and three rules are added:

1. **The guard.** Three ways to run a graph are weighed, each simulated from the same
   estimated costs: HEFT's plan; Dask's own rules (``dask-model``, from the state Dask's
   scheduler is in); and Dask's own rules held to a *subset* of the workers: the fastest ones
   (where a worker more than ``spread`` times slower holds the last task of a wave, and adds
   little), or one group of workers joined by links that are not narrow for the graph (a rack,
   where moving the graph's data between racks costs more than their parallelism wins: moving
   its mean edge over the link takes more than ``ccr`` times its mean task). The plan is weighed only on a cluster
   where a list scheduler has something to win (the fastest worker more than ``spread`` times the
   slowest, as learned or declared, or a network of per-pair rates or racks). Dask's own rules
   give way only to one predicted at least ``margin`` shorter; on workers alike and joined alike
   nothing is simulated and Dask decides, stealing included: a list scheduler rarely wins there
   by more than its estimates are off. Runs of the same work then try once each of the three
   that the predictions do not rule out (within the margin's band of the best, widened to twice
   the error the predictions of the choices measured so far showed), each given up for the best
   measured so far once it falls 25% behind it (at the same share of its tasks finished, from a
   fifth on, or over the whole run: successive elimination, Even-Dar et al.
   2006; Hoeffding races, Maron and Moore 1993), and keep the one measured shortest (medians of
   the latest five; Dask's own unless another is 5% shorter). Mid-run, a group behind a
   narrow link is not weighed: the finished tasks' outputs sit on both sides of it. A graph
   with one of Dask's peer-to-peer shuffles is never planned (Dask's shuffle extension pins
   its outputs itself, within the workers its barrier task is held to), only held, and only
   before it starts. Until a run of the same work has been measured, the prediction picks only
   among Dask's own choices: nothing can watch a plan yet, and a plan from costs learned from a
   few tasks can be far off where stealing mends them (a static schedule's sensitivity to its
   estimates: Canon and Jeannot 2010); the plan is predicted, and a later run tries it, watched.
2. **Learning within the run** (selective rescheduling, Sakellariou and Zhao 2004): as the run's
   tasks finish, a task-name prefix whose measured duration (at speed 1, by the learned worker
   speeds) is more than ``drift`` away from the estimate the plan used, or worker speeds learned
   since that differ by as much, re-estimates the costs of the unfinished tasks and decides
   again (plan, guard), at most once per ``interval`` seconds and ``replans`` times per run, so
   the work per scheduler event stays bounded. A first run starts from Dask's defaults (every
   unseen prefix 0.5 s) and is placed by Dask until what it measures says a plan would win.
3. **Priors.** Costs come from what Dask's scheduler measured per prefix (in this run and earlier
   ones), from what the plugin saw finish on which worker (worker speeds), output sizes from
   ``nbytes``; ``taskflow.compute(costs=...)`` and a learned profile win (see the runtime docs).

Dask's own work stealing (its cost-benefit rule, ``distributed.stealing``) stays on for every
task the guard leaves to Dask (among the subset's workers, where held); planned tasks are held to
their workers. A held run whose subset loses its workers is held to those left, or left to Dask.

References: H. Topcuoglu, S. Hariri, M.-Y. Wu, IEEE TPDS 13(3), 2002 (HEFT; the
communication-to-computation ratio); R. Sakellariou, H. Zhao,
"A low-cost rescheduling policy for efficient mapping of workflows on grid systems", Scientific
Programming 12(4), 2004; T. Yang, A. Gerasoulis, "DSC: scheduling parallel tasks on an unbounded
number of processors", IEEE TPDS 5(9), 1994 (zeroing a costly edge by putting both ends on one
processor, the idea behind holding a graph to one rack); O. Maron, A. Moore, "Hoeffding races:
accelerating model selection search", NIPS 1993; E. Even-Dar, S. Mannor, Y. Mansour, "Action
elimination and stopping conditions for the multi-armed bandit problem", JMLR 7, 2006; Dask
distributed's work-stealing documentation.
"""

from __future__ import annotations

import copy

from taskflow.scheduling import CHOICES, AdaptiveOptions

from ._transfer_cpu import MOST_PAIRS, transfer_cpu_schedule
from .base import list_schedule, register, to_schedule
from .heft import HEFT
from .ranks import upward_rank


__all__ = ["Adaptive", "APPEND_PAIRS"]

#: tasks x workers above which the adaptive scheduler's plan appends each task after its worker's
#: last (``heft-append``) instead of searching gaps: planning stays linear in the tasks (100,000
#: tasks on 1,000 workers in 2 s where the gap search takes 21 s; a million in 15 s)
APPEND_PAIRS = 20_000_000


@register
class Adaptive(HEFT):
    """HEFT's plan, kept inside Dask only where it is predicted to win (see the module docstring).

    Parameters
    ----------
    seed : int, optional
    margin : float
        Keep a plan predicted at least this fraction shorter than Dask's own (default 0.15: the
        prediction of Dask's own scheduling is off by up to that on small graphs).
    drift : float
        Re-decide when a measured duration or speed is this fraction off (default 0.3).
    interval : float
        Seconds between two re-decisions of a run (default 0.25).
    replans : int
        Re-decisions per run at most (default 8).
    spread : float
        Plan only on a cluster whose fastest worker is more than this many times the slowest, or
        with a network of per-pair rates or racks (default 2: speeds learned from a few tasks on a
        loaded machine differ by 1.5x between identical workers).
    steal : bool
        Let Dask's work stealing move a planned task to an idle worker (loose restrictions);
        default False: planned tasks are held to their workers.
    limit : int
        Tasks above which the guard does not simulate and keeps a plan only on workers of
        different speeds (default 3,000).
    choices : sequence of str
        What the guard may choose from: ``"plan"``, ``"dask"`` (Dask's own scheduling),
        ``"subset"`` (Dask's own scheduling held to some of the workers: those at least
        ``1 / spread`` as fast as the fastest, or one group of workers joined by links that are
        not narrow for the graph); default all three.
    ccr : float
        A link is narrow for a graph when moving its mean edge over it takes more than this many
        times its mean task's computing (default 10: on one machine's loopback the real-workload
        suite's graphs reach 7, where the network is not what limits them; across a 100 Mbit/s
        link they reach 30 and more).

    Raises
    ------
    TaskflowError
        An option out of its range (named).
    """

    name = "adaptive"
    summary = (
        "HEFT, Dask's own on the workers that pay, or Dask's own: whichever is predicted (then measured) "
        "shortest; re-decided as it learns"
    )

    def __init__(
        self,
        seed: int | None = None,
        margin: float = 0.15,
        drift: float = 0.3,
        interval: float = 0.25,
        replans: int = 8,
        limit: int = 3000,
        spread: float = 2.0,
        steal: bool = False,
        choices=CHOICES,
        ccr: float = 10.0,
        **options,
    ):
        super().__init__(seed, **options)
        #: what the plugin applies the guard and the re-decisions of this scheduler's runs by
        self.adaptive = AdaptiveOptions(margin, drift, interval, replans, limit, spread, steal, choices, ccr)
        #: ``(message, per_byte)``: CPU seconds at speed 1 a transfer costs each end, per message and
        #: per byte; a copy made by :meth:`inside_dask` has them (None: HEFT's plan)
        self.transfer_cpu = None
        self.options.update(self.adaptive.as_options())

    def inside_dask(self, message: float, per_byte: float) -> "Adaptive":
        """This scheduler as it plans inside Dask, where a transfer takes CPU from both ends: a copy
        whose plans charge each transfer ``message`` seconds and ``per_byte`` seconds per byte (at
        speed 1) on each end's worker. This one is left as it was.

        Parameters
        ----------
        message, per_byte : float
            CPU seconds at speed 1, per transfer and per byte.
        """
        inside = copy.copy(self)
        inside.transfer_cpu = (float(message), float(per_byte))
        return inside

    def plan(self, cost_model):
        """HEFT's plan; inside Dask (``transfer_cpu`` set), HEFT's order with transfers that take CPU
        from both ends (:mod:`schedulers._transfer_cpu`), up to :data:`~schedulers._transfer_cpu.MOST_PAIRS`
        tasks x workers and for tasks of one core. Above :data:`APPEND_PAIRS` tasks x workers each task is
        appended after its worker's last (``heft-append``): HEFT's gap search grows faster than
        the graph.

        Parameters
        ----------
        cost_model : CostModel
        """
        a = cost_model.arrays
        cpu = self.transfer_cpu
        if cpu and a.n and a.n * len(cost_model.cluster) <= MOST_PAIRS and int(a.cores.max()) <= 1:
            return to_schedule(cost_model, transfer_cpu_schedule(cost_model, *cpu), self.name)
        if a.n * len(cost_model.cluster) > APPEND_PAIRS:
            return to_schedule(
                cost_model, list_schedule(cost_model, upward_rank(cost_model), insertion=False), self.name
            )
        return super().plan(cost_model)
