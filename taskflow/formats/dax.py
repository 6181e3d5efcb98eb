"""Pegasus DAX 2.1 (XML), read only, through defusedxml (no entity expansion, no external DTDs).

cost = the job's ``runtime``; edges from ``<child ref><parent ref/></child>``; an edge's size is the
bytes of the files the parent writes (``link="output"``) and the child reads (``link="input"``),
matched by file name along each declared edge (names such as ``fit.txt`` repeat across jobs, so a
name alone is no global id). ``meta.category`` keeps the job's ``name`` (the transformation).
"""

from __future__ import annotations

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from ..checks import decimal
from ..errors import FormatError
from ..graph import TaskGraph
from ._util import graph_from_files

__all__ = ["graph_from_dax", "parse_xml"]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_xml(data: bytes, source: str):
    """Parse XML safely (defusedxml: entity expansion, external entities and DTDs refused).

    Parameters
    ----------
    data : bytes
    source : str
        The file's name, for errors.

    Raises
    ------
    FormatError
        Unsafe or malformed XML (the line and column are named), or more than
        ``max_xml_elements()`` elements.
    """
    from ._util import MAX_BYTES_ENV, max_xml_elements

    if data.count(b"<") > max_xml_elements():
        raise FormatError(
            f"{source}: XML with more than {max_xml_elements():,} elements (raise the limit with "
            f"--max-bytes or {MAX_BYTES_ENV})"
        )
    try:
        return SafeET.fromstring(data)
    except DefusedXmlException as e:
        raise FormatError(f"{source}: refused unsafe XML ({type(e).__name__})") from None
    except SafeET.ParseError as e:
        line, col = getattr(e, "position", (0, 0))
        raise FormatError(f"{source}: malformed XML at line {line}, column {col + 1}") from None


def graph_from_dax(root, source: str = "dax") -> TaskGraph:
    """A graph from a Pegasus DAX document: a task per ``<job>`` (cost: its ``runtime``), an edge per
    ``<child>``/``<parent>`` carrying the files the parent writes and the child reads.

    Parameters
    ----------
    root : xml.etree.ElementTree.Element
        The ``<adag>`` element.
    source : str

    Raises
    ------
    FormatError
        Not an ``<adag>``, a bad field, or a link to an unknown job.
    """
    if _local(root.tag) != "adag":
        raise FormatError(f"{source}: root element is <{_local(root.tag)}>, expected <adag> (Pegasus DAX)")
    ids, cost, category, outputs, inputs = [], [], [], [], []
    links = []
    for el in root:
        tag = _local(el.tag)
        if tag == "job":
            jid = el.get("id")
            if not jid:
                raise FormatError(f"{source}: <job> without an 'id' attribute")
            rt = el.get("runtime")
            if rt is None:
                raise FormatError(f"{source}: job {jid!r}: missing attribute 'runtime'")
            try:
                rt = decimal(rt.strip())
            except ValueError:
                raise FormatError(f"{source}: job {jid!r}: runtime {rt!r} is not a number") from None
            o, i = {}, {}
            for u in el:
                if _local(u.tag) != "uses":
                    continue
                name = u.get("file") or u.get("name")
                try:
                    size = decimal((u.get("size") or "0").strip())
                except ValueError:
                    raise FormatError(
                        f"{source}: job {jid!r}: file {name!r} size {u.get('size')!r} is not a number"
                    ) from None
                link = u.get("link")
                if link == "output":
                    o[name] = o.get(name, 0.0) + size
                elif link == "input":
                    i[name] = max(i.get(name, 0.0), size)
            ids.append(jid)
            cost.append(rt)
            category.append(el.get("name"))
            outputs.append(o)
            inputs.append(i)
        elif tag == "child":
            child = el.get("ref")
            for p in el:
                if _local(p.tag) == "parent":
                    links.append((p.get("ref"), child))
    return graph_from_files(
        root.get("name", "dax"), ids, cost, None, outputs, inputs, links, category, source, noun="job"
    )
