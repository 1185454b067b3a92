"""The simulated scheduler over real HTTP.

Upstream behaviour relied on (kube-scheduler default plugins,
https://kubernetes.io/docs/concepts/scheduling-eviction/):
- filters NodeUnschedulable, TaintToleration (NoSchedule/NoExecute; Exists ignores the value; an
  empty key with Exists tolerates every taint; PreferNoSchedule never blocks), NodeAffinity
  (nodeSelector AND required nodeSelectorTerms: terms ORed, In/NotIn/Exists/DoesNotExist/Gt/Lt,
  matchFields metadata.name), NodeResourcesFit (pods, cpu, memory against allocatable);
- an unschedulable pod gets PodScheduled=False reason Unschedulable and the FitError message
  "0/N nodes are available: <sorted count reason, ...>. preemption: 0/N nodes are available: ...";
- pods are retried when the cluster changes (node added, resources freed).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

MSG_TAINT_CPU = (
    "0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu. "
    "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, "
    "3 No preemption victims found for incoming pod."
)


def _node_of(cluster: Any, name: str) -> str | None:
    pod = cluster.pod(name)
    return None if pod is None else pod["spec"].get("nodeName")


async def test_pending_pod_is_scheduled_and_runs_as_seen_by_a_watch(cluster: Any) -> None:
    await cluster.create_node("n1")
    url = "/api/v1/namespaces/default/pods?watch=1&fieldSelector=metadata.name%3Dw"
    seen: list[tuple[str, str | None, str | None, str | None]] = []
    async with cluster.http.get(url, timeout=None) as resp:
        assert resp.status == 200
        await cluster.create_pod("w")

        async def read() -> None:
            async for line in resp.content:
                ev = orjson.loads(line)
                obj = ev["object"]
                seen.append(
                    (
                        ev["type"],
                        obj["spec"].get("nodeName"),
                        obj["status"].get("phase"),
                        cluster.condition(obj, "Ready"),
                    )
                )
                if obj["status"].get("phase") == "Running":
                    return

        await asyncio.wait_for(read(), 8.0)
    assert seen[0] == ("ADDED", None, "Pending", None)
    assert ("MODIFIED", "n1", "Pending", None) in seen  # bound, not yet started
    assert seen[-1] == ("MODIFIED", "n1", "Running", "True")
    assert cluster.condition(cluster.pod("w"), "PodScheduled") == "True"


async def test_unschedulable_message_counts_reasons_then_a_new_node_takes_the_pod(cluster: Any) -> None:
    for i in range(2):
        await cluster.create_node(
            f"gpu-{i}", cpu="16", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        )
    for i in range(3):
        await cluster.create_node(f"small-{i}", cpu="1")
    await cluster.create_pod("big", cpu="2")
    await cluster.until(
        lambda: cluster.condition(cluster.pod("big"), "PodScheduled", "reason") == "Unschedulable"
    )
    pod = cluster.pod("big")
    assert cluster.condition(pod, "PodScheduled") == "False"
    assert cluster.condition(pod, "PodScheduled", "message") == MSG_TAINT_CPU
    assert pod["status"]["phase"] == "Pending"
    await cluster.create_node("large", cpu="4")
    await cluster.until(lambda: _node_of(cluster, "big") == "large")
    await cluster.until(lambda: cluster.phase("big") == "Running")


async def test_taints_and_tolerations(cluster: Any) -> None:
    await cluster.create_node("plain", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    await cluster.create_node("team", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    await cluster.create_node("evict", taints=[{"key": "x", "value": "y", "effect": "NoExecute"}])
    # Only "plain" is open to pods without tolerations (PreferNoSchedule never blocks).
    await cluster.create_pod("none")
    # Equal matches key+value; the others stay excluded by their untolerated taints.
    await cluster.create_pod(
        "equal",
        tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
        nodeSelector={"kubernetes.io/hostname": "team"},
    )
    await cluster.create_pod(
        "wrong-value",
        tolerations=[{"key": "team", "value": "b", "effect": "NoSchedule"}],
        nodeSelector={"kubernetes.io/hostname": "team"},
    )
    await cluster.create_pod(
        "exists",
        tolerations=[{"key": "x", "operator": "Exists"}],
        nodeSelector={"kubernetes.io/hostname": "evict"},
    )
    await cluster.create_pod(
        "all", tolerations=[{"operator": "Exists"}], nodeSelector={"kubernetes.io/hostname": "evict"}
    )
    await cluster.until(lambda: all(_node_of(cluster, n) for n in ("none", "equal", "exists", "all")))
    assert _node_of(cluster, "none") == "plain"
    assert _node_of(cluster, "equal") == "team"
    assert _node_of(cluster, "exists") == "evict"
    assert _node_of(cluster, "all") == "evict"
    await cluster.until(lambda: cluster.condition(cluster.pod("wrong-value"), "PodScheduled", "message"))
    msg = cluster.condition(cluster.pod("wrong-value"), "PodScheduled", "message")
    # Filters run in upstream's order (taints before affinity) and the first failure counts per node.
    assert msg == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {team: a}, 1 node(s) had untolerated taint {x: y}. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert _node_of(cluster, "wrong-value") is None


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


async def test_node_selector_and_required_affinity(cluster: Any) -> None:
    await cluster.create_node("a", labels={"zone": "z1", "gen": "5", "spot": "true"})
    await cluster.create_node("b", labels={"zone": "z2", "gen": "7"})
    await cluster.create_node("c", labels={"zone": "z3", "gen": "6", "gpu": "1"})
    cases = {
        "sel": ({"nodeSelector": {"zone": "z2"}}, "b"),
        "in": (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z3"]}]}
                )
            },
            "c",
        ),
        "notin": (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1", "z3"]}]}
                )
            },
            "b",
        ),
        "exists": (
            {"affinity": _affinity({"matchExpressions": [{"key": "spot", "operator": "Exists"}]})},
            "a",
        ),
        "dne": (
            {
                "affinity": _affinity(
                    {
                        "matchExpressions": [
                            {"key": "gpu", "operator": "DoesNotExist"},
                            {"key": "gen", "operator": "Gt", "values": ["6"]},
                        ]
                    }
                )
            },
            "b",
        ),
        "lt": (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["6"]}]}
                )
            },
            "a",
        ),
        "fields": (
            {
                "affinity": _affinity(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}
                )
            },
            "c",
        ),
        "or": (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["nope"]}]},
                    {"matchExpressions": [{"key": "gen", "operator": "In", "values": ["7"]}]},
                )
            },
            "b",
        ),
    }
    for name, (extra, _want) in cases.items():
        await cluster.create_pod(name, **extra)
    await cluster.create_pod("nowhere", nodeSelector={"zone": "z9"})
    await cluster.until(lambda: all(_node_of(cluster, n) for n in cases))
    assert {n: _node_of(cluster, n) for n in cases} == {n: want for n, (_e, want) in cases.items()}
    await cluster.until(lambda: cluster.condition(cluster.pod("nowhere"), "PodScheduled", "message"))
    assert cluster.condition(cluster.pod("nowhere"), "PodScheduled", "message").startswith(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption:"
    )


async def test_cordoned_node_gets_no_new_pods_but_daemonset_pods_tolerate_it(cluster: Any) -> None:
    await cluster.create_node("open")
    await cluster.create_node("cordoned", unschedulable=True)
    for i in range(6):
        await cluster.create_pod(f"p{i}")
    await cluster.until(lambda: all(_node_of(cluster, f"p{i}") for i in range(6)))
    assert {_node_of(cluster, f"p{i}") for i in range(6)} == {"open"}
    # A DaemonSet pod pins itself with matchFields and carries the unschedulable toleration.
    await cluster.create_pod(
        "ds-pod",
        affinity=_affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cordoned"]}]}
        ),
        tolerations=[
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
        ],
    )
    await cluster.until(lambda: _node_of(cluster, "ds-pod") == "cordoned")


async def test_resources_are_accounted_and_freed(cluster: Any) -> None:
    await cluster.create_node("n1", cpu="1", memory="1Gi", pods="10")
    await cluster.create_pod("r1", cpu="400m", memory="256Mi")
    await cluster.create_pod("r2", cpu="400m", memory="256Mi")
    await cluster.until(lambda: _node_of(cluster, "r1") and _node_of(cluster, "r2"))
    await cluster.create_pod("r3", cpu="400m", memory="700Mi")
    await cluster.until(lambda: cluster.condition(cluster.pod("r3"), "PodScheduled", "message"))
    assert cluster.condition(cluster.pod("r3"), "PodScheduled", "message").startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption:"
    )
    await cluster.delete_pod("r1", grace=0)
    await cluster.until(lambda: _node_of(cluster, "r3") == "n1")


async def test_pod_count_limit(cluster: Any) -> None:
    await cluster.create_node("tiny", pods="2")
    for i in range(3):
        await cluster.create_pod(f"c{i}")
    await cluster.until(lambda: sum(1 for i in range(3) if _node_of(cluster, f"c{i}")) == 2)
    await asyncio.sleep(0.1)
    pending = [f"c{i}" for i in range(3) if not _node_of(cluster, f"c{i}")]
    assert len(pending) == 1
    await cluster.until(lambda: cluster.condition(cluster.pod(pending[0]), "PodScheduled", "message"))
    assert "1 Too many pods" in cluster.condition(cluster.pod(pending[0]), "PodScheduled", "message")


async def test_many_pending_pods_are_spread_in_one_go(cluster: Any) -> None:
    for i in range(4):
        await cluster.create_node(f"n{i}", cpu="8")
    await asyncio.gather(*(cluster.create_pod(f"m{i}", cpu="100m") for i in range(80)))
    await cluster.until(lambda: all(_node_of(cluster, f"m{i}") for i in range(80)))
    per_node: dict[str, int] = {}
    for i in range(80):
        node = _node_of(cluster, f"m{i}")
        per_node[node] = per_node.get(node, 0) + 1
    # LeastAllocated spreads identical pods evenly over identical nodes.
    assert sorted(per_node.values()) == [20, 20, 20, 20]
