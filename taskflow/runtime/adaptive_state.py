"""The adaptive scheduler's state of one run (:class:`AdaptiveState`), in one record: its phase, a
small state machine of its own beside the run's (:mod:`.runs`), and what its decisions used.

=============  ======================================================================================
``undecided``  nothing decided yet
``learning``   decided by the guard's predictions, or left to Dask's own scheduling: decided again
               as the run's costs and worker speeds are learned (:meth:`.Adaptation.learn_within`)
``trying``     trying a choice the measured runs of the same work have not settled, watched: given
               up once it falls behind the one measured shortest so far (its ``fallback``)
``given up``   its try fell behind: the next decision takes the fallback
``fixed``      decided by the measured runs of the same work: not decided again within the run
=============  ======================================================================================

The allowed moves are :data:`PHASE_MOVES`; every move goes through :meth:`AdaptiveState.move`,
which refuses any other. Its other fields change only through its own methods too (``decide``,
``hold``, ``race``, ``used``, ``stamped``, ...): no other module assigns them.
"""

from __future__ import annotations

import enum

__all__ = ["Phase", "PHASE_MOVES", "AdaptiveState", "LISTENING"]


class Phase(enum.Enum):
    """Where a run stands with the adaptive scheduler (see the module docstring)."""

    UNDECIDED = "undecided"
    LEARNING = "learning"
    TRYING = "trying"
    GIVEN_UP = "given up"
    FIXED = "fixed"


#: every allowed move of a run's phase (from -> the phases it may move to)
PHASE_MOVES = {
    Phase.UNDECIDED: frozenset({Phase.LEARNING, Phase.TRYING, Phase.FIXED}),
    Phase.LEARNING: frozenset({Phase.TRYING, Phase.FIXED}),  # its first guard, once it was left to Dask
    Phase.TRYING: frozenset({Phase.GIVEN_UP}),
    Phase.GIVEN_UP: frozenset({Phase.FIXED}),
    Phase.FIXED: frozenset(),
}

#: the phases in which what a finished task measured concerns the run (re-decisions, or a try's watch)
LISTENING = frozenset({Phase.UNDECIDED, Phase.LEARNING, Phase.TRYING})


class AdaptiveState:
    """The adaptive scheduler's state of one run (the plugin's :class:`~.runs.GraphRun` holds it
    as ``adapt``).

    Attributes
    ----------
    phase : Phase
    decision : str or None
        What runs it now: one of :data:`taskflow.scheduling.CHOICES` (None before a decision).
    path : list of str
        Each decision it took in turn (a try given up: ``["plan", "dask"]``).
    guarded : int
        How many times the guard chose for it (at its start, or mid-run).
    redecisions : int
        How many times it was decided again within the run (a try given up counts).
    decided_at, decide_secs : float
        When the latest decision was taken (monotonic seconds) and how long it took.
    estimates : dict
        Task-name prefix -> the mean cost (seconds at speed 1) the latest decision used.
    speeds_used : dict
        Worker name -> the speed the latest decision used.
    predictions : dict
        Choice -> the guard's predicted makespan, from its first decision.
    held : tuple of str
        The addresses of the workers its tasks are held to (the ``subset`` choice); empty: none.
    watch : float
        Trying: the seconds since it began after which the try is given up.
    fallback : str or None
        Trying or given up: the choice measured shortest so far, which a try given up takes.
    reference : list of float
        Trying: the progress curve of the fallback's runs, which the try races.
    pace : float
        Trying: how much slower than the reference it is expected to progress (a hold on part of
        the cluster: the part's share of its speed).
    signature : tuple or None
        What makes runs of the same work alike (task prefixes, size).
    first : tuple or None
        What its first decision read: ``(graph, cluster, Dask's state or None, the measured runs
        of the same work then or None)``, so that the simulator can replay the decision
        (:func:`taskflow.runtime.simulated.simulate_adaptive`).
    """

    __slots__ = (
        "phase",
        "_decision",
        "path",
        "guarded",
        "redecisions",
        "decided_at",
        "decide_secs",
        "estimates",
        "speeds_used",
        "predictions",
        "held",
        "watch",
        "fallback",
        "reference",
        "pace",
        "signature",
        "first",
    )

    def __init__(self):
        self.phase = Phase.UNDECIDED
        self._decision: str | None = None
        self.path: list = []
        self.guarded = 0
        self.redecisions = 0
        self.decided_at = 0.0
        self.decide_secs = 0.0
        self.estimates: dict = {}
        self.speeds_used: dict = {}
        self.predictions: dict = {}
        self.held: tuple = ()
        self.watch = 0.0
        self.fallback: str | None = None
        self.reference: list = []
        self.pace = 1.0
        self.signature = None
        self.first: tuple | None = None

    def __repr__(self) -> str:
        return f"<AdaptiveState {self.phase.value}, decision {self._decision!r}>"

    @property
    def decision(self) -> str | None:
        """What runs it now (the latest decision), or None before one; each new one joins :attr:`path`."""
        return self._decision

    @decision.setter
    def decision(self, value: str | None) -> None:
        if value is not None and (not self.path or self.path[-1] != value):
            self.path.append(value)
        self._decision = value

    def move(self, to: Phase) -> None:
        """Move to phase ``to`` (staying where it is is no move).

        Raises
        ------
        RuntimeError
            :data:`PHASE_MOVES` has no such move.
        """
        if to is self.phase:
            return
        if to not in PHASE_MOVES[self.phase]:
            raise RuntimeError(f"adaptive state: no move from {self.phase.value} to {to.value}")
        self.phase = to

    def decide(self, choice: str) -> None:
        """``choice`` now runs the run: its phase moves on from undecided (decided again as it
        learns)."""
        self.decision = choice
        if self.phase is Phase.UNDECIDED:
            self.move(Phase.LEARNING)

    def named(self, signature) -> None:
        """The kind of work the run is, under which its measured runs are kept."""
        self.signature = signature

    def first_read(self, first: tuple) -> None:
        """What its first decision read (kept from the first decision only)."""
        if self.first is None:
            self.first = first

    def guarding(self) -> dict:
        """The guard chooses for it once more: counted, and its predictions (returned, to be
        filled) begun afresh."""
        self.guarded += 1
        self.predictions = {}
        return self.predictions

    def redecided(self) -> None:
        """It is decided again within the run."""
        self.redecisions += 1

    def stamped(self, at: float, secs: float | None = None) -> None:
        """A decision, or a look that changed nothing, at ``at`` (monotonic seconds), which took
        ``secs`` (None: as long as the last one)."""
        self.decided_at = at
        if secs is not None:
            self.decide_secs = secs

    def took(self, secs: float) -> None:
        """A look that changed nothing took ``secs``: the next look waits on the longest."""
        self.decide_secs = max(self.decide_secs, secs)

    def used(self, speeds: dict, estimates: dict | None = None) -> None:
        """The workers' speeds (and the prefixes' mean costs) the latest decision used."""
        self.speeds_used = speeds
        if estimates is not None:
            self.estimates = estimates

    def hold(self, addresses) -> None:
        """Its tasks are held to the workers at ``addresses`` (none: not held)."""
        self.held = tuple(sorted(addresses))

    def race(self, pace: float, reference: list | None = None) -> None:
        """Trying: the pace it is expected to keep against ``reference`` (the progress curve it
        races; None keeps the one it has)."""
        self.pace = pace
        if reference is not None:
            self.reference = reference

    def try_choice(self, watch: float, fallback: str, reference: list) -> None:
        """Begin trying a choice: given up after ``watch`` seconds, or once behind ``reference``
        (the progress curve of ``fallback``, the choice measured shortest so far)."""
        self.move(Phase.TRYING)
        self.watch, self.fallback, self.reference = watch, fallback, reference

    def give_up(self) -> None:
        """The try fell behind: it is no longer watched, and the next decision takes the fallback."""
        self.move(Phase.GIVEN_UP)
        self.watch, self.pace, self.reference = 0.0, 1.0, []
        self.redecisions += 1  # changed its mind: not kept under either choice
        self.guarded += 1

    def take_fallback(self) -> str | None:
        """Given up: the fallback, now fixed (None where it is not given up)."""
        if self.phase is not Phase.GIVEN_UP:
            return None
        self.move(Phase.FIXED)
        fallback, self.fallback = self.fallback, None
        return fallback
