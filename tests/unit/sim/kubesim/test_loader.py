"""The dump loader: kubectl output in, insertion-ordered clean objects out; dump_cluster round-trips."""

from __future__ import annotations

import copy
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubespot.sim.kubesim.generator import KIND_ORDER, ClusterSpec, generate_cluster
from kubespot.sim.kubesim.loader import dump_cluster, load_dump, load_dump_data

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "kubectl-dump-small.json"
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
Obj = dict[str, Any]


def key(o: Obj) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def pod(name: str, namespace: str | None = "default", **meta: Any) -> Obj:
    metadata: Obj = {"name": name, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}}


def test_loads_kubectl_list_fixture() -> None:
    raw = json.loads(FIXTURE.read_text())
    objects = load_dump(FIXTURE, now=NOW)
    ranks = [KIND_ORDER.index(o["kind"]) for o in objects]
    assert ranks == sorted(ranks)
    namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    assert sorted(namespaces) == ["kube-system", "shop", "tools"]  # referenced by the objects
    assert len(objects) == len(raw["items"]) + len(namespaces)
    raw_uids = {key(o): o["metadata"]["uid"] for o in raw["items"]}
    for o in objects:
        meta = o["metadata"]
        for noise in ("managedFields", "resourceVersion", "selfLink"):
            assert noise not in meta
        assert meta["uid"]
        assert isinstance(meta["labels"], dict) and isinstance(meta["annotations"], dict)
        assert meta["creationTimestamp"]
        if o["kind"] != "Namespace":
            assert meta["uid"] == raw_uids[key(o)]
        if o["kind"] in ("Node", "Namespace"):
            assert "namespace" not in meta
    by_key = {key(o): o for o in objects}
    # Content the loader does not own is kept verbatim.
    web = by_key[("Deployment", "shop", "web")]
    assert web["metadata"]["generation"] == 3
    assert "kubectl.kubernetes.io/last-applied-configuration" in web["metadata"]["annotations"]
    node = by_key[("Node", "", "ip-192-168-12-34.us-west-2.compute.internal")]
    assert node["spec"]["providerID"] == "aws:///us-west-2a/i-0a1b2c3d4e5f60718"
    assert node["status"]["images"]
    tools = by_key[("Namespace", "", "tools")]
    assert tools["metadata"]["labels"] == {"kubernetes.io/metadata.name": "tools"}
    assert tools["metadata"]["creationTimestamp"] == "2026-11-22T12:00:00Z"
    # Owner references still resolve after loading.
    uids = {o["metadata"]["uid"] for o in objects}
    for o in objects:
        for ref in o["metadata"].get("ownerReferences", []):
            assert ref["uid"] in uids


def test_round_trip_generated_cluster(tmp_path: Path) -> None:
    objects = generate_cluster(ClusterSpec(nodes=8, pods_per_node=12, seed=5), now=NOW)
    expected = orjson.dumps(objects)
    for indent in (True, False):
        path = tmp_path / f"cluster-{indent}.json"
        dump_cluster(objects, path, indent=indent)
        doc = json.loads(path.read_text())
        assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
        assert orjson.dumps(load_dump(path, now=NOW)) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster-False.json", "cluster-True.json"]


def test_round_trip_strips_store_fields(tmp_path: Path) -> None:
    objects = generate_cluster(ClusterSpec(nodes=2, pods_per_node=3), now=NOW)
    stored = copy.deepcopy(objects)
    for i, o in enumerate(stored):
        o["metadata"]["resourceVersion"] = str(100 + i)
    path = tmp_path / "stored.json"
    dump_cluster(stored, path)
    assert load_dump(path, now=NOW) == objects


def test_load_dump_data_does_not_modify_its_input() -> None:
    raw = json.loads(FIXTURE.read_text())
    before = copy.deepcopy(raw)
    from_data = load_dump_data(raw, now=NOW)
    assert raw == before
    assert from_data == load_dump(FIXTURE, now=NOW)


def test_plain_array_ndjson_and_concatenated_documents(tmp_path: Path) -> None:
    items = json.loads(FIXTURE.read_text())["items"]
    expected = load_dump(FIXTURE, now=NOW)
    array = tmp_path / "array.json"
    array.write_text(json.dumps(items))
    ndjson = tmp_path / "objects.ndjson"
    ndjson.write_text("".join(json.dumps(o) + "\n" for o in items))
    concatenated = tmp_path / "concatenated.json"
    concatenated.write_text("\n".join(json.dumps(o, indent=4) for o in items))
    for path in (array, ndjson, concatenated):
        assert load_dump(path, now=NOW) == expected, path.name


def test_yaml(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    items = json.loads(FIXTURE.read_text())["items"]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(items))
    assert load_dump(path, now=NOW) == load_dump(FIXTURE, now=NOW)
    # Unquoted timestamps become datetimes in YAML; they must come back as RFC 3339 strings.
    single = tmp_path / "one.yml"
    single.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: default\n"
        "  creationTimestamp: 2026-11-20T10:00:00Z\nspec:\n  containers: []\n"
    )
    (loaded_ns, loaded_pod) = load_dump(single, now=NOW)
    assert loaded_ns["kind"] == "Namespace"
    assert loaded_pod["metadata"]["creationTimestamp"] == "2026-11-20T10:00:00Z"


def test_typed_list_from_the_api() -> None:
    data = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [{"metadata": {"name": "a", "namespace": "default", "uid": "u-a"}, "spec": {}}],
    }
    (_ns, p) = load_dump_data(data, now=NOW)
    assert p["kind"] == "Pod" and p["apiVersion"] == "v1" and p["metadata"]["uid"] == "u-a"
    assert load_dump_data({"apiVersion": "v1", "kind": "List", "items": None}) == []


def test_unknown_kinds_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    data = [
        pod("a", uid="u-a"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "default"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k", "namespace": "default"}},
    ]
    with caplog.at_level(logging.WARNING, logger="kubespot.sim.kubesim.loader"):
        objects = load_dump_data(data, source="mixed.json", now=NOW)
    assert [o["kind"] for o in objects] == ["Namespace", "Pod"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "mixed.json" in messages and "Service (1)" in messages and "Job (2)" in messages


def test_missing_uids_namespaces_and_old_api_versions() -> None:
    data = [
        pod("no-uid"),
        pod("no-namespace", namespace=None, uid="u-1"),
        {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "apps", "uid": "u-2"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "uid": "ns-apps"}},
        pod("no-uid"),  # duplicate: ignored
    ]
    first = load_dump_data(data, now=NOW)
    assert load_dump_data(data, now=NOW) == first  # generated uids are stable
    by_key = {key(o): o for o in first}
    assert len(first) == 5
    assert by_key[("Pod", "default", "no-uid")]["metadata"]["uid"]
    assert ("Pod", "default", "no-namespace") in by_key
    assert by_key[("PodDisruptionBudget", "apps", "b")]["apiVersion"] == "policy/v1"
    assert by_key[("Namespace", "", "apps")]["metadata"]["uid"] == "ns-apps"
    assert [o["kind"] for o in first] == ["Namespace", "Namespace", "PodDisruptionBudget", "Pod", "Pod"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ('{"kind": "List", "items": [', "invalid JSON at line 1"),
        ('{"kind": "List", "items": [{"kind": "Pod"}]}\n{oops', "invalid JSON at line 2"),
        ("42", "expected a kubectl List"),
        ('{"kind": "List", "items": {"a": 1}}', "'items' of the List is not an array"),
        ('{"kind": "List", "items": [7]}', "item 0 is a int"),
        ('{"kind": "List", "items": [{"metadata": {"name": "x"}}]}', "item 0 has no 'kind'"),
        ('{"kind": "List", "items": [{"kind": "Pod", "metadata": {}}]}', "has no metadata.name"),
        ('{"kind": "List", "items": [{"kind": "Pod"}]}', "has no 'metadata' object"),
        ('[{"kind": "Pod", "metadata": {"name": "p"}, "spec": []}]', "'spec' is not an object"),
    ],
)
def test_malformed_files_raise_value_error_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "broken-dump.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"broken-dump\.json") as info:
        load_dump(path)
    assert message in str(info.value)


def test_malformed_yaml(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("items: [\n  - kind: Pod\n  bad indentation: ]\n")
    with pytest.raises(ValueError, match=r"broken\.yaml: invalid YAML"):
        load_dump(path)


def test_claims_volumes_and_classes_load_before_the_pods_that_use_them() -> None:
    """A dump with `pvc,pv,sc` keeps them (the scheduler places pods that mount claims by their
    volumes' topology); volumes and classes are cluster-scoped, claims namespaced."""
    data = [
        pod("db-0", uid="u-db"),
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "db"},
        },
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1", "namespace": "x"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"}},
    ]
    objects = load_dump_data(data, source="storage.json", now=NOW)
    kinds = [o["kind"] for o in objects]
    assert kinds[-1] == "Pod"
    assert (
        kinds.index("StorageClass") < kinds.index("PersistentVolume") < kinds.index("PersistentVolumeClaim")
    )
    by_kind = {o["kind"]: o["metadata"] for o in objects}
    assert (
        "namespace" not in by_kind["PersistentVolume"]
        and by_kind["PersistentVolumeClaim"]["namespace"] == "db"
    )
