"""Link shaping with ``tc``: a token bucket per link (a NIC's upload or download, the inter-rack
link), or one ``htb`` class per destination for a per-pair matrix."""

from __future__ import annotations

from .namespaces import run_command

__all__ = ["tbf", "htb"]


def tbf(ns: str, dev: str, rate: float) -> None:
    """A token bucket of ``rate`` bytes/s on ``dev``'s egress: a burst of 5 ms of it (at least
    16 KiB; the kernel splits larger offloaded packets), a queue of 100 ms.

    Parameters
    ----------
    ns, dev : str
        The namespace and the device in it.
    rate : float
        Bytes/s.
    """
    burst = max(16 << 10, int(rate * 0.005))
    run_command(
        [
            "tc",
            "-n",
            ns,
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            f"{int(rate * 8)}bit",
            "burst",
            str(burst),
            "latency",
            "100ms",
        ]
    )


def htb(ns: str, dev: str, dests) -> None:
    """One ``htb`` class per destination address (rate = ceil), the rest of the traffic unshaped.

    Parameters
    ----------
    ns, dev : str
        The namespace and the device in it.
    dests : list of (str, float)
        Destination address, bytes/s.
    """
    run_command(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "999"])
    run_command(
        ["tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:999", "htb", "rate", "10gbit"]
    )
    for k, (ip, rate) in enumerate(dests, start=10):
        bits = f"{int(rate * 8)}bit"
        burst = str(max(16 << 10, int(rate * 0.005)))
        run_command(
            [
                "tc",
                "-n",
                ns,
                "class",
                "add",
                "dev",
                dev,
                "parent",
                "1:",
                "classid",
                f"1:{k}",
                "htb",
                "rate",
                bits,
                "ceil",
                bits,
                "burst",
                burst,
                "cburst",
                burst,
            ]
        )
        run_command(
            [
                "tc",
                "-n",
                ns,
                "filter",
                "add",
                "dev",
                dev,
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                "1",
                "u32",
                "match",
                "ip",
                "dst",
                f"{ip}/32",
                "flowid",
                f"1:{k}",
            ]
        )
