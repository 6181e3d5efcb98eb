"""Sample workflows shipped inside the package (provenance and licences in
``workflows/data/samples/NOTICE.md``): what the documentation, ``taskflow samples`` and the quick
benchmark suite use, so nothing a user runs needs data beside the checkout."""

from __future__ import annotations

import shutil
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


def write_samples(out) -> list:
    """Write a starter kit into the folder ``out`` (made if missing) and return what was written:
    the sample files under their own names, plus ``montage.json`` (the real Montage trace),
    ``workflow.xml`` (the Montage DAX), ``graph.json`` (that DAX in our format: costs, no
    per-worker costs, so it runs on any cluster), ``cluster.json`` (4 workers ``w0``-``w3`` at
    speeds 1, 1, 2, 4, 100 MB/s, 1 ms) and ``NOTICE.md``.

    Parameters
    ----------
    out : str or os.PathLike
    """
    from taskflow.cluster import Cluster
    from taskflow.formats import load_graph, save_cluster, save_graph

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SAMPLES:
        src = path(name)
        shutil.copyfile(src, out / src.name)
        written.append(out / src.name)
    for alias, name in (("montage.json", "montage"), ("workflow.xml", "montage-dax")):
        shutil.copyfile(path(name), out / alias)
        written.append(out / alias)
    save_graph(load_graph(path("montage-dax")), out / "graph.json")
    save_cluster(Cluster.heterogeneous([1, 1, 2, 4], bandwidth=1e8, latency=1e-3, name="hetero-4"),
                 out / "cluster.json")
    shutil.copyfile(_DIR / "NOTICE.md", out / "NOTICE.md")
    written += [out / "graph.json", out / "cluster.json", out / "NOTICE.md"]
    return written
