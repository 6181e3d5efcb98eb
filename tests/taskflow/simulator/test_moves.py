"""The moves of ``_datamoves`` on the engine's layout (Python lists): copies of outputs kept in
the order they came, and the source an input is fetched from."""

import math

from taskflow.simulator._datamoves import drop_copy, have, keep_copy, only_copy, source_of
from taskflow.simulator._loopstate import DEAD, HAVE_B, HAVE_NEXT, HAVE_W, HOME, laid_out

_HAVE, _KEEP, _ONLY, _DROP, _SOURCE = have.plain, keep_copy.plain, only_copy.plain, drop_copy.plain, source_of.plain


def _state(n=2, W=4):
    def new_copy(C, F, w, b):  # the engine's: appended
        F[HAVE_W].append(w)
        F[HAVE_NEXT].append(-1)
        F[HAVE_B].append(b)
        return len(F[HAVE_W]) - 1

    T = laid_out(COPIES=[-1] * n, HOME=[-1] * n)
    F = laid_out(HAVE_W=[], HAVE_NEXT=[], HAVE_B=[])
    K = laid_out(DEAD=[False] * W)
    keep = keep_copy.bound(new_copy=new_copy)
    only = only_copy.bound(new_copy=new_copy)
    return T, F, K, keep, only


def test_copies_are_kept_in_the_order_they_came_and_grow_in_place():
    T, F, K, keep, only = _state()
    only(None, T, F, 0, 2)  # computed on worker 2
    T[HOME][0] = 2
    keep(None, T, F, 0, 1, 10.0)
    keep(None, T, F, 0, 3, 5.0)
    keep(None, T, F, 0, 1, 4.0)  # fewer bytes than it holds: unchanged
    keep(None, T, F, 0, 3, 8.0)  # more: grows
    assert [_HAVE(T, F, 0, w) for w in range(4)] == [-1.0, 10.0, math.inf, 8.0]
    assert _HAVE(T, F, 1, 2) == -1.0  # another task's output is not there
    assert len(F[HAVE_W]) == 3  # three copies, none made twice


def test_an_input_comes_from_its_home_else_the_first_live_copy_holding_enough():
    T, F, K, keep, only = _state()
    only(None, T, F, 0, 2)
    T[HOME][0] = 2
    keep(None, T, F, 0, 0, 3.0)
    keep(None, T, F, 0, 1, 10.0)
    keep(None, T, F, 0, 3, 10.0)
    assert _SOURCE(T, F, K, 0, 5.0) == 2  # the home, alive
    K[DEAD][2] = True
    _DROP(T, F, 0, 2)
    assert _HAVE(T, F, 0, 2) == -1.0
    assert _SOURCE(T, F, K, 0, 5.0) == 1  # the first live copy with 5 bytes (0 holds 3)
    assert _SOURCE(T, F, K, 0, 2.0) == 0
    K[DEAD][1] = True
    assert _SOURCE(T, F, K, 0, 5.0) == 3
    assert _SOURCE(T, F, K, 0, 50.0) == -1  # no copy holds that many
    assert _SOURCE(T, F, K, 1, 0.0) == -1  # never computed
