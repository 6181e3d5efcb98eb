"""What the benchmarks on the network testbed share: a benchmark runs itself again inside the
testbed's client namespace (``--inside CONFIG``), and says in one line why it cannot run where no
testbed can start (not root, no ``ip netns``)."""

from __future__ import annotations

import json
import sys


def inside_or_unavailable(args, name: str, inside):
    """The benchmark's exit status where it ends here, else None (it goes on to start its testbed):
    0 after ``inside(config)`` where it runs inside one (``--inside``), 2 where no testbed can
    start on this machine (the reason printed).

    Parameters
    ----------
    args : argparse.Namespace
        With ``inside``: the JSON config, or None.
    name : str
        The benchmark, for the message.
    inside : callable
        Its part that runs in the testbed's client namespace.
    """
    if args.inside:
        inside(json.loads(args.inside))
        return 0
    from taskflow.testbed import available

    why = available()
    if why:
        print(f"{name}: {why}", file=sys.stderr)
        return 2
    return None
