"""Work stealing's rules, written once: where a ready task goes (:func:`earliest`), whom an idle
worker steals from (:func:`victim`), in which order it weighs the victim's queued tasks
(:func:`rank`) and which it takes (:func:`take`). ``schedulers.work_stealing.WorkStealing`` calls
them on the engine's events and the simulator's compiled loop (:mod:`taskflow.simulator._wsloop`) on its own, so the two decide
alike by construction; each is a :func:`taskflow.jit.kernel` (plain Python for small inputs).

They neither allocate nor return arrays, so they are compiled without numba's reference counting
(as :mod:`taskflow.simulator.network._flows`' kernels: the compiled loop calls them once per decision).
"""

from __future__ import annotations

import numpy as np

from .jit import kernel

__all__ = ["earliest", "victim", "rank", "take"]


@kernel(cache=True, _nrt=False)
def earliest(load, dead, feasible, move):
    """The worker where a ready task would start earliest: its ``load`` (queued seconds per core)
    plus ``move`` (the seconds to bring the task's inputs there); a lost worker (``dead`` = inf)
    or an infeasible one never; ties: the lower index.

    Parameters
    ----------
    load, move : numpy.ndarray
        Per worker.
    dead : numpy.ndarray
        Per worker, or empty: none is lost.
    feasible : numpy.ndarray
        Per worker, whether the task can run there, or empty: anywhere.
    """
    some_dead = dead.shape[0] > 0  # (the compiled loop keeps one version of the loop per case)
    some_not = feasible.shape[0] > 0
    best = np.inf
    arg = 0
    for w in range(load.shape[0]):
        e = load[w] + move[w]
        if some_dead:
            e += dead[w]
        if some_not and not feasible[w]:
            e = np.inf
        if e < best:
            best = e
            arg = w
    return arg


@kernel(cache=True, _nrt=False)
def victim(load, dead, nqueued, thief):
    """The most loaded worker other than ``thief`` with queued tasks and not lost (``dead`` = inf);
    ties: the lower index; -1 when there is none.

    Parameters
    ----------
    load, nqueued : numpy.ndarray
        Per worker.
    dead : numpy.ndarray
        Per worker, or empty: none is lost.
    thief : int
    """
    some_dead = dead.shape[0] > 0
    best = -np.inf
    arg = -1
    for w in range(load.shape[0]):
        if w != thief and nqueued[w] > 0 and (not some_dead or dead[w] == 0.0) and load[w] > best:
            best = load[w]
            arg = w
    return arg


@kernel(cache=True, _nrt=False)
def rank(score, move, cand, m, sc, mo, i):
    """Put candidate ``i`` (``sc``: its move over its duration on the thief; ``mo``: its move) among
    the ``m`` ranked so far, in ``(score, move, task)`` order: the cheapest to move for its work
    first. Returns ``m + 1``.

    Parameters
    ----------
    score, move, cand : numpy.ndarray
        The ranked candidates (room for one more).
    m, i : int
    sc, mo : float
    """
    x = m
    while x > 0 and (
        score[x - 1] > sc or (score[x - 1] == sc and (move[x - 1] > mo or (move[x - 1] == mo and cand[x - 1] > i)))
    ):
        score[x] = score[x - 1]
        move[x] = move[x - 1]
        cand[x] = cand[x - 1]
        x -= 1
    score[x] = sc
    move[x] = mo
    cand[x] = i
    return m + 1


@kernel(cache=True, _nrt=False)
def take(occ, cores, vic, thief, cand, move, d_thief, d_victim, m, bi, bw):
    """The ranked candidates ``cand[:m]`` the idle ``thief`` takes from ``vic``, while it is the
    less loaded: each whose move and run on the thief end before the victim's queue would let it
    start; ``occ`` (queued seconds) moved with each. Written to ``bi``, ``bw`` (task, thief);
    returns how many.

    Parameters
    ----------
    occ, cores : numpy.ndarray
        Per worker.
    vic, thief, m : int
    cand, move, d_thief, d_victim : numpy.ndarray
        Per candidate: the task, its move to the thief, its seconds there and on the victim.
    bi, bw : numpy.ndarray
        Out.
    """
    k = 0
    thief_load = occ[thief] / cores[thief]
    for x in range(m):
        victim_load = occ[vic] / cores[vic]
        if thief_load >= victim_load:
            break
        if thief_load + move[x] + d_thief[x] < victim_load:  # the task waits behind the victim's queue
            bi[k] = cand[x]
            bw[k] = thief
            k += 1
            occ[vic] -= d_victim[x]
            occ[thief] += d_thief[x]
            thief_load = occ[thief] / cores[thief]
    return k
