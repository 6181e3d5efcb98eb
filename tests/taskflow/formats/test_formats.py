import json
import zipfile

import networkx as nx
import pytest

from taskflow import (
    FormatError,
    GraphError,
    from_networkx,
    load_cluster,
    load_graph,
    load_graphs,
    save_cluster,
    save_graph,
    to_dot,
    to_networkx,
)
from taskflow.formats import detect_format, estee, graph_to_dict
from taskflow.formats.wfformat import graph_to_wfformat

from tests.conftest import shared, shared_graph_files


def raw_wf_counts(path):
    """Task and edge counts straight from a WfFormat 1.5 file (parents and children links)."""
    doc = json.loads(path.read_text())
    tasks = doc["workflow"]["specification"]["tasks"]
    links = {(p, t["id"]) for t in tasks for p in t["parents"]}
    links |= {(t["id"], c) for t in tasks for c in t["children"]}
    return len(tasks), len(links)


@pytest.mark.parametrize(
    "name",
    [
        "montage-chameleon-2mass-01d-001",
        "epigenomics-chameleon-hep-2seq-50k-001",
        "srasearch-chameleon-10a-001",
        "helloworld-chain-5-chameleon",
    ],
)
def test_wfinstances_counts_costs_and_sizes(name):
    path = shared("wfinstances", f"{name}.json")
    g = load_graph(path)
    assert (len(g), g.num_edges) == raw_wf_counts(path)
    doc = json.loads(path.read_text())
    ex = {t["id"]: t for t in doc["workflow"]["execution"]["tasks"]}
    sizes = {f["id"]: f["sizeInBytes"] for f in doc["workflow"]["specification"]["files"]}
    spec = {t["id"]: t for t in doc["workflow"]["specification"]["tasks"]}
    for t in g.tasks():
        assert t.cost == ex[t.id]["runtimeInSeconds"]
        assert t.cores == ex[t.id].get("coreCount", 1)
    for s, d, z in g.edges():
        shared_files = set(spec[s]["outputFiles"]) & set(spec[d]["inputFiles"])
        assert z == sum(sizes[f] for f in shared_files)


def test_montage_known_counts():
    g = load_graph(shared("wfinstances", "montage-chameleon-2mass-01d-001.json"))
    assert (len(g), g.num_edges) == (103, 231)
    assert any(s > 0 for _, _, s in g.edges())


def test_stg_in_the_kasahara_archives_form_counts_tasks_without_the_dummy_nodes(tmp_path):
    """The archive's files declare n and list n + 2 rows (entry and exit dummies); ours may count
    them: both load to the same graph."""
    text = shared("stg", "robot.stg").read_text()
    first = text.lstrip().split()[0]
    ours = load_graph(shared("stg", "robot.stg"))
    archive = tmp_path / "robot-archive.stg"
    archive.write_text(text.replace(first, str(int(first) - 2), 1))
    g = load_graph(archive)
    assert len(g) == len(ours) == int(first) and g.num_edges == ours.num_edges
    bad = tmp_path / "bad.stg"
    bad.write_text(text.replace(first, str(int(first) - 1), 1))
    with pytest.raises(FormatError, match="expected 89 or, with the two dummy nodes, 91"):
        load_graph(bad)


def test_stg_robot_matches_its_footer():
    g = load_graph(shared("stg", "robot.stg"))
    # footer: 88 tasks + 2 dummies, 131 edges + 4 dummy edges, CP length 569
    assert (len(g), g.num_edges) == (90, 135)
    from taskflow import critical_path

    assert critical_path(g)[0] == 569
    assert g.task("t0").cost == 0 and g.task("t6").cost == 28
    assert sorted(g.predecessors("t6")) == ["t1", "t4"]  # row "6 28 2 1 4"
    assert all(z == 0 for _, _, z in g.edges())


def test_dax_edges_sizes_by_file_rule():
    path = shared("dax", "Montage_25.xml")
    g = load_graph(path)
    assert detect_format(path) == "dax"
    import xml.etree.ElementTree as ET  # the stdlib parser, only to compute expectations here

    root = ET.parse(path).getroot()
    ns = root.tag.split("}")[0] + "}"
    jobs = root.findall(f"{ns}job")
    links = {(p.get("ref"), c.get("ref")) for c in root.findall(f"{ns}child") for p in c.findall(f"{ns}parent")}
    assert (len(g), g.num_edges) == (len(jobs), len(links))
    by_id = {j.get("id"): j for j in jobs}
    for s, d, z in g.edges():
        outs = {u.get("file"): float(u.get("size")) for u in by_id[s] if u.get("link") == "output"}
        ins = {u.get("file") for u in by_id[d] if u.get("link") == "input"}
        assert z == sum(v for f, v in outs.items() if f in ins)
    assert g.task(jobs[0].get("id")).cost == float(jobs[0].get("runtime"))


def test_dax_heft_paper_runtimes():
    g = load_graph(shared("dax", "HEFT_paper.xml"))
    assert (len(g), g.num_edges) == (10, 15)
    assert g.task("ID00001").cost == 14 and g.edge_size("ID00001", "ID00002") == 2250


def test_estee_set_and_selection():
    path = shared("estee", "elementary.zip")
    graphs = load_graphs(path)
    assert len(graphs) == 16
    grid = load_graph(f"{path}#grid")
    assert grid.name == "grid" and (len(grid), grid.num_edges) == (361, 684)
    assert load_graph(f"{path}#14").name == "grid"
    with pytest.raises(FormatError, match="pick one"):
        load_graph(path)
    with pytest.raises(FormatError, match="no graph 'nope'"):
        load_graph(f"{path}#nope")
    # sizes are MiB in the file, bytes here
    with zipfile.ZipFile(path) as z:
        table = json.loads(z.read(z.namelist()[0]))
    tasks = json.loads(table["graph"]["14"])
    assert grid.edge_size("t0", "t1") == tasks[0]["outputs"][0]["s"] * 2**20
    assert grid.task("t1").cost == tasks[1]["d"] and grid.task("t1").meta == {"expected_cost": tasks[1]["e_d"]}


def test_estee_cpus_and_merged_outputs(tmp_path):
    tasks = [
        {"d": 1, "e_d": 1, "cpus": 1, "outputs": [{"s": 1, "e_s": 1}, {"s": 2, "e_s": 2}], "inputs": []},
        {"d": 2, "e_d": 2, "cpus": 3, "outputs": [], "inputs": [[0, 0], [0, 1]]},
    ]
    p = tmp_path / "set.zip"
    p.write_bytes(estee.dumps_set([("two", tasks)]))
    g = load_graph(p)  # a set of one needs no #K
    assert g.edge_size("t0", "t1") == 3 * 2**20 and g.task("t1").cores == 3


def test_native_round_trip_is_exact(tmp_path, heft_graph):
    g = heft_graph
    g.add_task("extra", cost=0.5, output_size=12, cores=2, meta={"category": "x"})
    g.add_edge("t10", "extra", size=3)
    p = tmp_path / "g.json"
    save_graph(g, p)
    g2 = load_graph(p)
    assert graph_to_dict(g2) == graph_to_dict(g)
    p2 = tmp_path / "g2.json"
    save_graph(g2, p2)
    assert p.read_text() == p2.read_text()


def test_cluster_round_trip(tmp_path, heft_cluster):
    from taskflow import Cluster, Worker

    c = Cluster(
        [Worker("a", 1.0, 2), Worker(7, 2.5)],
        bandwidth=5.0,
        bandwidths={"a": {7: 2.0}},
        latency=0.1,
        task_overhead=0.004,
        backplane=3.0,
    )
    save_cluster(c, tmp_path / "c.json")
    c2 = load_cluster(tmp_path / "c.json")
    assert c2 == c and c2.transfer_time(10, "a", 7) == pytest.approx(5.1) and c2.task_overhead == 0.004
    assert c2.backplane == 3.0 and c2 != c.replace(backplane=None)


@pytest.mark.parametrize("name", ["montage-chameleon-2mass-01d-001", "epigenomics-chameleon-hep-2seq-50k-001"])
def test_wfformat_to_native_and_back(tmp_path, name):
    g = load_graph(shared("wfinstances", f"{name}.json"))
    save_graph(g, tmp_path / "n.json")
    n = load_graph(tmp_path / "n.json")
    assert graph_to_dict(n) == graph_to_dict(g)  # counts, costs, sizes, cores, categories
    save_graph(n, tmp_path / "w.json", format="wfformat")
    w = load_graph(tmp_path / "w.json")
    assert (len(w), w.num_edges) == (len(g), g.num_edges)
    assert [t.cost for t in w.tasks()] == [t.cost for t in g.tasks()]
    assert sorted(w.edges()) == sorted(g.edges())


def test_written_wfformat_follows_the_1_5_schema(heft_graph):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(shared("schema", "wfcommons-schema-v1.5.json").read_text())
    doc = graph_to_wfformat(heft_graph)
    jsonschema.validate(doc, schema)
    assert doc["schemaVersion"] == "1.5"


def test_wfformat_1_4_is_read():
    doc = {
        "name": "old",
        "schemaVersion": "1.4",
        "workflow": {
            "tasks": [
                {
                    "name": "a",
                    "type": "compute",
                    "runtimeInSeconds": 3.0,
                    "cores": 2,
                    "parents": [],
                    "files": [
                        {"name": "x", "sizeInBytes": 40, "link": "output"},
                        {"name": "y", "sizeInBytes": 2, "link": "output"},
                    ],
                },
                {
                    "name": "b",
                    "type": "compute",
                    "runtimeInSeconds": 1.5,
                    "parents": ["a"],
                    "files": [{"name": "x", "sizeInBytes": 40, "link": "input"}],
                },
            ]
        },
    }
    from taskflow.formats.wfformat import graph_from_wfformat

    g = graph_from_wfformat(doc)
    assert g.task("a").cores == 2 and g.task("a").output_size == 42
    assert list(g.edges()) == [("a", "b", 40)]


def test_networkx_round_trip_and_dot(heft_graph):
    G = to_networkx(heft_graph)
    assert isinstance(G, nx.DiGraph) and G.number_of_edges() == 15
    assert G.nodes["t1"]["costs"] == {"p1": 14, "p2": 16, "p3": 9}
    assert graph_to_dict(from_networkx(G)) == graph_to_dict(heft_graph)
    dot = to_dot(heft_graph)
    assert dot.startswith('digraph "heft-paper-fig2" {') and '"t1" -> "t2" [label="18 B"];' in dot
    assert dot.count("->") == 15


def test_from_networkx_defaults():
    G = nx.DiGraph()
    G.add_node("a", output_size=5)
    G.add_edge("a", "b")
    g = from_networkx(G, name="x")
    assert g.task("b").cost == 1.0 and g.edge_size("a", "b") == 5.0


# ------------------------------------------------------------------ bad input
def write(tmp_path, text, name="bad.json"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_malformed_json_names_line_and_column(tmp_path):
    p = write(tmp_path, '{"format": "taskflow-graph/1",\n "tasks": [\n  {"id": "a" "cost": 1}]}')
    with pytest.raises(FormatError, match=r"malformed JSON at line 3, column 14"):
        load_graph(p)


def test_unknown_format(tmp_path):
    with pytest.raises(FormatError, match="unknown format"):
        load_graph(write(tmp_path, "hello world\n", "x.txt"))
    with pytest.raises(FormatError, match="unknown format 'foo/9'"):
        load_graph(write(tmp_path, '{"format": "foo/9"}'))
    with pytest.raises(FormatError, match="unknown format"):
        load_graph(write(tmp_path, '{"a": 1}'))


def test_native_missing_fields_and_cycle(tmp_path):
    with pytest.raises(FormatError, match=r"tasks\[1\]: missing field 'cost'"):
        load_graph(write(tmp_path, '{"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1}, {"id": "b"}]}'))
    doc = {
        "format": "taskflow-graph/1",
        "tasks": [{"id": "a", "cost": 1}, {"id": "b", "cost": 1}],
        "edges": [{"from": "a", "to": "b", "size": 0}, {"from": "b", "to": "a", "size": 0}],
    }
    with pytest.raises(GraphError, match="cycle: (a -> b -> a|b -> a -> b)"):
        load_graph(write(tmp_path, json.dumps(doc)))  # validated when loaded


def test_dax_refuses_entity_expansion(tmp_path):
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>\n'
        '<adag><job id="a" runtime="1">&lol2;</job></adag>'
    )
    with pytest.raises(FormatError, match="refused unsafe XML"):
        load_graph(write(tmp_path, bomb, "bomb.xml"))


def test_malformed_xml_and_stg(tmp_path):
    with pytest.raises(FormatError, match="malformed XML at line 3, column 3"):
        load_graph(write(tmp_path, "<adag>\n<job id='a' runtime='1'>\n</adag>", "x.xml"))
    with pytest.raises(FormatError, match="line 3: expected 'id cost npred pred...'"):
        load_graph(write(tmp_path, "2\n0 1 0\n1 5 2 0\n", "x.stg"))
    with pytest.raises(FormatError, match="declares 3 tasks but has 2 rows"):
        load_graph(write(tmp_path, "3\n0 1 0\n1 5 1 0\n", "y.stg"))


def test_save_is_atomic(tmp_path, heft_graph, monkeypatch):
    p = tmp_path / "out.json"
    p.write_text("precious")
    from taskflow.formats import _util

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(_util.json, "dumps", boom)
    with pytest.raises(RuntimeError):
        save_graph(heft_graph, p)
    assert p.read_text() == "precious"
    assert [x.name for x in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("f", shared_graph_files(), ids=lambda p: p.name)
def test_every_shared_file_loads(f):
    for g in load_graphs(f):
        assert len(g) > 0
        g.validate()


def test_ids_that_wfformat_would_write_alike_are_refused_not_merged(tmp_path):
    from taskflow import TaskGraph

    g = TaskGraph("clash")
    g.add_task(1, cost=1.0)
    g.add_task("1", cost=2.0)
    with pytest.raises(FormatError, match="tasks 1 and '1' would both be written as id '1'"):
        save_graph(g, tmp_path / "w.json", format="wfformat")
    assert not (tmp_path / "w.json").exists()
