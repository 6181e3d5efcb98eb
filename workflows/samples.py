"""Sample workflows shipped inside the package (provenance and licences in
``workflows/data/samples/NOTICE.md``): what the documentation, ``taskflow samples`` and the quick
benchmark suite use, so nothing a user runs needs data beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SAMPLES", "path", "write_samples"]

_DIR = Path(__file__).resolve().parent / "data" / "samples"

#: Sample name -> (file name, what it is)
SAMPLES = {
    "montage": ("montage-chameleon-2mass-01d-001.json", "real Montage trace, 103 tasks (WfFormat 1.5)"),
    "epigenomics": ("epigenomics-chameleon-hep-2seq-50k-001.json", "real Epigenomics trace, 223 tasks (WfFormat 1.5)"),
    "montage-dax": ("Montage_25.xml", "25-task Montage (Pegasus DAX)"),
    "estee-elementary": ("elementary.zip", "Estee's elementary graph set, 16 graphs (pick one with #NAME)"),
    "heft-paper": ("heft_paper.graph.json", "the HEFT paper's example, 10 tasks (per-processor costs)"),
    "heft-paper-cluster": ("heft_paper.cluster.json", "its 3-processor cluster"),
}


def path(name: str) -> Path:
    """The packaged file of a sample.

    Parameters
    ----------
    name : str
        A key of :data:`SAMPLES`.

    Raises
    ------
    KeyError
        An unknown sample (the message lists them).
    FileNotFoundError
        The package was installed without its data.
    """
    if name not in SAMPLES:
        raise KeyError(f"unknown sample {name!r}; samples: {', '.join(SAMPLES)}")
    p = _DIR / SAMPLES[name][0]
    if not p.exists():
        raise FileNotFoundError(f"sample {name!r} is missing from the installation ({p})")
    return p


def write_samples(out, force: bool = False) -> list:
    """Write a starter kit into the folder ``out`` (made if missing) and return what was written:
    the sample files under their own names, plus ``montage.json`` (the real Montage trace),
    ``workflow.xml`` (the Montage DAX), ``graph.json`` (that DAX in our format: costs, no
    per-worker costs, so it runs on any cluster), ``cluster.json`` (4 workers ``w0``-``w3`` at
    speeds 1, 1, 2, 4, 100 MB/s, 1 ms) and ``NOTICE.md``. Each file is written whole or not at
    all (a temporary file renamed); a link in its place is replaced, never written through.

    Parameters
    ----------
    out : str or os.PathLike
    force : bool
        Replace files of those names already in ``out`` (without it, nothing is written when one
        exists with other contents: a file samples wrote before and nobody changed is no one's work).

    Raises
    ------
    TaskflowError
        A file of one of those names exists (and not ``force``), or a folder does (named).
    """
    from taskflow.cluster import Cluster
    from taskflow.errors import UsageError
    from taskflow.formats import atomic_write, dump_json, graph_text, load_graph
    from taskflow.formats.native import cluster_to_dict

    out = Path(out)
    contents = {path(name).name: path(name).read_bytes() for name in SAMPLES}
    contents["montage.json"] = path("montage").read_bytes()
    contents["workflow.xml"] = path("montage-dax").read_bytes()
    contents["graph.json"] = graph_text(load_graph(path("montage-dax")))
    contents["cluster.json"] = dump_json(
        cluster_to_dict(Cluster.heterogeneous([1, 1, 2, 4], bandwidth=1e8, latency=1e-3, name="hetero-4"))
    )
    contents["NOTICE.md"] = (_DIR / "NOTICE.md").read_bytes()
    folders = [n for n in contents if (out / n).is_dir() and not (out / n).is_symlink()]
    if folders:
        raise UsageError(f"{out / folders[0]}: is a folder; samples writes a file of that name")

    def same(name) -> bool:  # a file samples wrote before, unchanged: not the user's work
        target = out / name
        data = contents[name] if isinstance(contents[name], bytes) else contents[name].encode("utf-8")
        try:
            return not target.is_symlink() and target.stat().st_size == len(data) and target.read_bytes() == data
        except OSError:
            return False

    present = [n for n in contents if os.path.lexists(out / n) and not same(n)]
    if present and not force:
        listed = ", ".join(present[:4]) + (f" and {len(present) - 4} more" if len(present) > 4 else "")
        raise UsageError(f"{out}: {listed} exist already; nothing written (give --force to replace them)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in contents.items():
        atomic_write(out / name, data)
        written.append(out / name)
    return written
