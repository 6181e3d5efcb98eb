"""The catalog of node types an advisor chooses from: a YAML or JSON file, checked field by field.

A catalog (``format: taskflow-catalog/1``)::

    name: my-cloud
    currency: USD
    reference: one vCPU of the machine the task costs were measured on   # what speed 1.0 means
    latency: 50e-6          # seconds between two nodes (default 5e-5)
    backplane: 100gbit      # optional: the switch joining the nodes, shared by all their transfers
    overhead: 0.0           # seconds the runtime adds to every task (default 0)
    billing_minimum: 60     # seconds billed at least per node (default 0: per-second billing)
    kinds:                  # optional groups of task kinds, for per-kind speeds
      gpu: [forward, backward, loss, update, init]
    mix:                    # optional: pairs of types a configuration may combine
      - [c6i.4xlarge, c6i.xlarge]     # (or ``mix: true``: any two types)
    types:
      - name: c6i.4xlarge
        price: 0.68         # per node and hour, in ``currency``
        cores: 16           # tasks at once on a node (one worker); with gpus, per GPU worker: 1
        gpus: 0             # > 0: the node is that many workers (one per GPU), one task each
        speed: 1.0          # relative to the reference; or {default: 1.0, gpu: 0.05, decode: 1.3}
        memory: 32GiB       # per node (bytes, or a number with B/KB/MB/GB/KiB/MiB/GiB)
        gpu_memory: 16GiB   # per GPU (GPU nodes; default: memory / gpus)
        bandwidth: 12.5gbit # the node's network interface (bytes/s, or 200mbit, 1gbit, 25mbps)
        intra_bandwidth: 300gbit  # between the GPUs of one node (default 10 GB/s)
        counts: [1, 2, 4, 8]      # node counts to consider (or max_count: 16 for 1..16)
        source: https://...       # where the figures come from

Every error is one line naming the file, the type and the field: ``aws.yaml: types[2]
(g5.xlarge): price must be a number > 0, got 'cheap'``. Unknown fields are errors too (a typo
would otherwise silently take the default).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..checks import SIZE_UNITS, parse_rate, split_amount
from ..errors import FormatError, TaskflowError, UsageError

__all__ = ["NodeType", "Catalog", "load_catalog", "catalog_from_dict", "CATALOGS", "CATALOG_FORMAT", "MAX_COUNT"]

CATALOG_FORMAT = "taskflow-catalog/1"

#: the catalogs shipped with the package, by name: ``taskflow advise --catalog aws``
CATALOGS = {p.stem: p for p in sorted((Path(__file__).parent / "catalogs").glob("*.yaml"))}

_TOP = {
    "format",
    "name",
    "currency",
    "reference",
    "latency",
    "backplane",
    "overhead",
    "billing_minimum",
    "kinds",
    "mix",
    "types",
    "about",
}
_TYPE = {
    "name",
    "price",
    "cores",
    "gpus",
    "speed",
    "memory",
    "gpu_memory",
    "bandwidth",
    "intra_bandwidth",
    "counts",
    "max_count",
    "source",
}
#: the largest node count a type may offer
MAX_COUNT = 4096
#: the most configurations a search considers (more asks to narrow it)
MAX_CONFIGURATIONS = 200_000
DEFAULT_INTRA = 1e10
_MAX_BYTES = 16 * 2**20  # a catalog file larger than this is refused unread


@dataclass(frozen=True)
class NodeType:
    """One kind of node a cluster can be made of.

    Attributes
    ----------
    name : str
    price : float
        Per node and hour.
    cores : int
        Tasks at once on a CPU node (one worker); a GPU worker runs one task at a time.
    gpus : int
        0 for a CPU node, else the node is ``gpus`` workers, one per GPU.
    speeds : dict
        Task kind (or kind group) -> speed relative to the catalog's reference; ``"default"``
        for every other kind.
    memory : float
        Bytes per worker (a CPU node's memory; a GPU's own memory).
    bandwidth : float
        Bytes per second of the node's network interface.
    intra_bandwidth : float
        Bytes per second between two GPUs of the node.
    counts : tuple of int
        Node counts a configuration may use.
    source : str
    """

    name: str
    price: float
    cores: int = 1
    gpus: int = 0
    speeds: dict = field(default_factory=lambda: {"default": 1.0})
    memory: float = math.inf
    bandwidth: float = 1.25e9
    intra_bandwidth: float = DEFAULT_INTRA
    counts: tuple = (1,)
    source: str = ""

    @property
    def workers(self) -> int:
        """Workers per node (one per GPU, else one)."""
        return self.gpus or 1

    @property
    def slots(self) -> int:
        """Tasks at once per worker."""
        return 1 if self.gpus else self.cores

    def speed_of(self, kind: str, groups: dict) -> float:
        """The speed of tasks of ``kind`` (their own entry, else their group's, else default)."""
        s = self.speeds
        if kind in s:
            return s[kind]
        g = groups.get(kind)
        if g is not None and g in s:
            return s[g]
        return s["default"]


@dataclass(frozen=True)
class Catalog:
    """Node types, how their nodes are joined, and which types may be mixed.

    Attributes
    ----------
    name, currency, reference : str
    types : tuple of NodeType
    latency, overhead, billing_minimum : float
        Seconds.
    backplane : float or None
        Bytes per second of all transfers between nodes together (None: no shared limit).
    groups : dict
        Task kind -> the kind group it belongs to (from the file's ``kinds``).
    mix : tuple of (str, str)
        Pairs of type names a configuration may combine.
    source : str
        The file it was read from.
    """

    name: str
    types: tuple
    currency: str = "USD"
    reference: str = ""
    latency: float = 5e-5
    backplane: float | None = None
    overhead: float = 0.0
    billing_minimum: float = 0.0
    groups: dict = field(default_factory=dict)
    mix: tuple = ()
    source: str = ""

    def type(self, name: str) -> NodeType:
        """The node type called ``name``.

        Raises
        ------
        TaskflowError
            No such type (the known ones are listed).
        """
        for t in self.types:
            if t.name == name:
                return t
        raise UsageError(f"catalog {self.name!r} has no type {name!r}; types: {', '.join(t.name for t in self.types)}")


def load_catalog(spec) -> Catalog:
    """A catalog from a YAML or JSON file, or a shipped one by name (:data:`CATALOGS`).

    Parameters
    ----------
    spec : str or path

    Raises
    ------
    FormatError
        Unreadable, not YAML/JSON, or a field out of place (one line naming file, type and field).
    """
    spec = os.fspath(spec)
    path = CATALOGS.get(spec) if not os.path.exists(spec) else None
    path = path or Path(spec)
    label = path.name
    if not path.exists():
        raise FormatError(f"{spec}: no such catalog file (shipped catalogs: {', '.join(CATALOGS)})")
    if not path.is_file():
        raise FormatError(f"{spec}: not a regular file (a catalog is a YAML or JSON file)")
    with open(path, "rb") as f:
        data = f.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise FormatError(f"{label}: larger than 16 MiB; not a catalog")
    text = data.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text, object_pairs_hook=_json_object(label), parse_int=_json_int(label))
    except FormatError:
        raise
    except ValueError:
        doc = _yaml(text, label)
    except RecursionError:
        raise FormatError(f"{label}: nested too deeply to read") from None
    _expanded_size(doc, label)
    return catalog_from_dict(doc, label)


#: digits an integer of a catalog may have (Python refuses to read more than 4,300 at all)
MAX_DIGITS = 30
#: values a catalog may hold once YAML's aliases are expanded (a 1 KB file of nested aliases
#: would otherwise stand for 10^9 of them)
MAX_VALUES = 1_000_000


def _json_object(label: str):
    def pairs(items):
        seen = {}
        for k, v in items:
            if k in seen:
                raise FormatError(f"{label}: key {k!r} given twice in one object")
            seen[k] = v
        return seen

    return pairs


def _json_int(label: str):
    def parse(text: str):
        if len(text.lstrip("-")) > MAX_DIGITS:
            raise FormatError(
                f"{label}: an integer of {len(text.lstrip('-')):,} digits ({text[:12]}...); "
                f"a catalog's numbers have at most {MAX_DIGITS}"
            )
        return int(text)

    return parse


def _expanded_size(doc, label: str) -> None:
    """Refuse a document whose values, aliases expanded, number more than :data:`MAX_VALUES`
    (counted once per distinct object, shared ones by how often they are used: linear time)."""
    size: dict = {}
    stack = [(doc, False)]
    while stack:
        v, done = stack.pop()
        if id(v) in size and not done:
            continue
        kids = list(v.values()) + list(v.keys()) if isinstance(v, dict) else v if isinstance(v, list) else None
        if kids is None:
            size[id(v)] = 1
        elif done:
            size[id(v)] = 1 + sum(size.get(id(k), 1) for k in kids)
            if size[id(v)] > MAX_VALUES:
                raise FormatError(f"{label}: its aliases expand to more than {MAX_VALUES:,} values; not a catalog")
        else:
            size[id(v)] = 1  # being counted: a cycle counts once
            stack.append((v, True))
            stack.extend((k, False) for k in kids if id(k) not in size)


def _yaml(text: str, label: str):
    """``text`` as YAML, read as YAML 1.2's core schema reads it, strictly: numbers as JSON writes
    them (``5e-5`` is a float; ``1:30``, ``0x10`` and ``0o7`` are text, not 90, 16 and 7), booleans
    only ``true``/``false`` (not ``yes``, ``on``), a key given twice in one mapping refused, an
    integer of more than :data:`MAX_DIGITS` digits refused, each naming its line."""
    import yaml
    from yaml.constructor import ConstructorError

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _ in node.value:
                    key = (
                        self.construct_object(key_node, deep=True)
                        if key_node.tag != "tag:yaml.org,2002:merge"
                        else None
                    )
                    try:
                        dup = key is not None and key in seen
                    except TypeError:  # an unhashable key: PyYAML says so below
                        dup = False
                    if dup:
                        raise ConstructorError(
                            None, None, f"key {key!r} given twice in one mapping", key_node.start_mark
                        )
                    seen.add(key) if key is not None else None
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_int(self, node):
            text = self.construct_scalar(node)
            if len(text.lstrip("+-")) > MAX_DIGITS:
                raise ConstructorError(
                    None,
                    None,
                    f"an integer of {len(text.lstrip('+-')):,} digits; a catalog's numbers have at most {MAX_DIGITS}",
                    node.start_mark,
                )
            return int(text)

    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_yaml_map)
    Loader.yaml_implicit_resolvers = {}
    core = (
        ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")),
        ("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789")),
        ("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789.")),
        ("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]*\.[0-9]+$|^[-+]?[0-9]+\.$"), list("-+0123456789.")),
        ("tag:yaml.org,2002:float", re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+.")),
        ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    )
    for tag, pattern, first in core:
        Loader.add_implicit_resolver(tag, pattern, first)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or e
        if isinstance(e, ConstructorError):  # read as YAML, refused by the rules above
            raise FormatError(f"{label}:{where}: {problem}") from None
        raise FormatError(f"{label}:{where}: not YAML or JSON ({problem})") from None
    except RecursionError:
        raise FormatError(f"{label}: nested too deeply to read") from None


_YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)$")


def _fail(where: str, text: str):
    raise FormatError(f"{where}: {text}"[:300])


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _num(v, where: str, name: str, low: float = 0.0, strict: bool = True, default=None, high: float = 1e12) -> float:
    if v is None and default is not None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(where, f"{name} must be a number, got {_short(v)}")
    try:
        x = float(v)
    except OverflowError:
        x = math.inf
    if not (x > low if strict else x >= low) or not x <= high:
        _fail(where, f"{name} must be a number {'>' if strict else '>='} {low:g} and <= {high:g}, got {_short(v)}")
    return x


def _int(v, where: str, name: str, low: int = 1, high: int = MAX_COUNT) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        _fail(where, f"{name} must be an integer from {low} to {high}, got {_short(v)}")
    return v


def _size(v, where: str, name: str) -> float:
    if isinstance(v, str):
        m = split_amount(v)
        if not m or m[1].lower() not in SIZE_UNITS:
            _fail(where, f"{name} must be bytes or a size such as 16GiB or 512MB, got {_short(v)}")
        v = m[0] * SIZE_UNITS[m[1].lower()]
    return _num(v, where, name, high=1e18)


def _rate(v, where: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        _fail(where, f"{name} must be bytes/s or a rate such as 10gbit, got {_short(v)}")
    try:
        return parse_rate(v)
    except TaskflowError as e:
        _fail(where, f"{name}: {e}")


def _text(v, where: str, name: str) -> str:
    if not isinstance(v, str) or not v.strip():
        _fail(where, f"{name} must be a non-empty string, got {_short(v)}")
    return v


def _known(doc: dict, allowed: set, where: str) -> None:
    extra = sorted(str(k) for k in doc if k not in allowed)
    if extra:
        _fail(where, f"unknown field {extra[0]!r} (known: {', '.join(sorted(allowed))})")


def catalog_from_dict(doc, label: str = "catalog") -> Catalog:
    """A :class:`Catalog` from a parsed document, every field checked.

    Parameters
    ----------
    doc : dict
    label : str
        Named in errors (the file name).

    Raises
    ------
    FormatError
        One line naming the type and the field that is wrong.
    """
    if not isinstance(doc, dict):
        _fail(label, f"a catalog is a mapping with a 'types' list, got {type(doc).__name__}")
    _known(doc, _TOP, label)
    fmt = doc.get("format", CATALOG_FORMAT)
    if fmt != CATALOG_FORMAT:
        _fail(label, f"format must be {CATALOG_FORMAT!r}, got {_short(fmt)}")
    groups = {}
    kinds = doc.get("kinds") or {}
    if not isinstance(kinds, dict):
        _fail(label, f"kinds must map a group name to a list of task kinds, got {type(kinds).__name__}")
    for gname, members in kinds.items():
        if not isinstance(members, list) or not all(isinstance(k, str) for k in members):
            _fail(label, f"kinds.{gname}: must be a list of task kinds (strings)")
        for k in members:
            if k in groups:
                _fail(label, f"kinds.{gname}: task kind {k!r} is already in group {groups[k]!r}")
            groups[k] = str(gname)
    raw = doc.get("types")
    if not isinstance(raw, list) or not raw:
        _fail(label, "types must be a non-empty list of node types")
    types, seen = [], set()
    for k, t in enumerate(raw):
        where = f"{label}: types[{k}]"
        if not isinstance(t, dict):
            _fail(where, f"a node type is a mapping, got {type(t).__name__}")
        name = _text(t.get("name"), where, "name")
        where = f"{where} ({name})"
        if name in seen:
            _fail(where, "a second type of this name")
        seen.add(name)
        types.append(_node_type(t, where, groups))
    mix = doc.get("mix", ())
    pairs = []
    if mix is True:
        n = len(types)
        if n * (n - 1) // 2 > MAX_CONFIGURATIONS:  # each pair is at least one configuration
            _fail(
                label,
                f"mix: true pairs {n:,} types into {n * (n - 1) // 2:,} pairs, each at least one "
                f"configuration: more than the search's {MAX_CONFIGURATIONS:,}; list the pairs to mix",
            )
        pairs = [(a.name, b.name) for i, a in enumerate(types) for b in types[i + 1 :]]
    elif mix not in (False, None, ()):
        if not isinstance(mix, list):
            _fail(label, f"mix must be true or a list of [type, type] pairs, got {_short(mix)}")
        for k, p in enumerate(mix):
            if not isinstance(p, list) or len(p) != 2 or p[0] == p[1]:
                _fail(label, f"mix[{k}]: must be a pair of two different type names, got {_short(p)}")
            for n in p:
                if n not in seen:
                    _fail(label, f"mix[{k}]: unknown type {_short(n)} (types: {', '.join(t.name for t in types)})")
            pairs.append((p[0], p[1]))
    return Catalog(
        name=str(doc.get("name") or label),
        types=tuple(types),
        currency=_text(doc.get("currency", "USD"), label, "currency"),
        reference=str(doc.get("reference", "")),
        latency=_num(doc.get("latency"), label, "latency", strict=False, default=5e-5, high=1e6),
        backplane=_rate(doc["backplane"], label, "backplane") if doc.get("backplane") is not None else None,
        overhead=_num(doc.get("overhead"), label, "overhead", strict=False, default=0.0, high=1e6),
        billing_minimum=_num(doc.get("billing_minimum"), label, "billing_minimum", strict=False, default=0.0, high=1e7),
        groups=groups,
        mix=tuple(pairs),
        source=label,
    )


def _node_type(t: dict, where: str, groups: dict) -> NodeType:
    _known(t, _TYPE, where)
    if "price" not in t:
        _fail(where, "missing field 'price' (per node and hour)")
    price = _num(t["price"], where, "price", high=1e9)
    gpus = _int(t.get("gpus", 0), where, "gpus", low=0, high=1024)
    cores = _int(t.get("cores", 1), where, "cores", high=1 << 20)
    speed = t.get("speed", 1.0)
    if isinstance(speed, dict):
        if "default" not in speed:
            _fail(where, "speed: a per-kind speed mapping needs a 'default' entry")
        speeds = {str(k): _num(v, where, f"speed.{k}", low=1e-9, high=1e9) for k, v in speed.items()}
    else:
        speeds = {"default": _num(speed, where, "speed", low=1e-9, high=1e9)}
    memory = _size(t["memory"], where, "memory") if "memory" in t else math.inf
    if gpus:
        memory = _size(t["gpu_memory"], where, "gpu_memory") if "gpu_memory" in t else memory / gpus
    elif "gpu_memory" in t:
        _fail(where, "gpu_memory is for a type with gpus > 0")
    if "bandwidth" not in t:
        _fail(where, "missing field 'bandwidth' (the node's network interface, e.g. 10gbit)")
    bandwidth = _rate(t["bandwidth"], where, "bandwidth")
    intra = _rate(t["intra_bandwidth"], where, "intra_bandwidth") if "intra_bandwidth" in t else DEFAULT_INTRA
    if "counts" in t and "max_count" in t:
        _fail(where, "give counts or max_count, not both")
    if "counts" in t:
        c = t["counts"]
        if not isinstance(c, list) or not c:
            _fail(where, f"counts must be a non-empty list of node counts, got {_short(c)}")
        counts = tuple(sorted({_int(x, where, "counts[]") for x in c}))
    else:
        counts = tuple(range(1, _int(t.get("max_count", 1), where, "max_count") + 1))
    return NodeType(
        name=t["name"],
        price=price,
        cores=cores,
        gpus=gpus,
        speeds=speeds,
        memory=memory,
        bandwidth=bandwidth,
        intra_bandwidth=intra,
        counts=counts,
        source=str(t.get("source", "")),
    )
