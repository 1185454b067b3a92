"""The scheduler's fast paths agree with its plain per-node filters.

``_pick`` narrows the nodes it visits (a hard spread constraint's allowed domains, anti-affinity's
excluded domains, the rare filters outside the inlined loop); ``fit_reasons`` asks every filter of
one node directly (pkg/scheduler/schedule_one.go findNodesThatPassFilters and
framework.RunFilterPlugins). After a mixed burst: a pod left unschedulable fits no node, and the
bound pods satisfy their required anti-affinity and DoNotSchedule spread (filtering.go of
interpodaffinity and podtopologyspread).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from kubespot.sim.kubesim.controllers.scheduler import scheduler_of
from kubespot.sim.kubesim.testing import pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _spec(rng: random.Random, group: int) -> dict[str, Any]:
    app = f"g{group}"
    sel = {"matchLabels": {"app": app}}
    body = pod(
        f"{app}-{rng.randrange(10**9)}", labels={"app": app}, requests={"cpu": rng.choice(["100m", "700m"])}
    )
    kind = group % 3
    if kind == 0:
        body["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": sel, "topologyKey": HOST}
                ]
            }
        }
    elif kind == 1:
        body["spec"]["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}
        ]
    return body


async def test_unschedulable_pods_fit_nowhere_and_bound_pods_keep_their_constraints(cluster: Any) -> None:
    rng = random.Random(7)
    for i in range(9):
        await cluster.create_node(f"n{i}", cpu="2", labels={ZONE: "abc"[i % 3]}, wait_ready=False)
    await cluster.until(lambda: all(cluster.node_ready(f"n{i}") == "True" for i in range(9)))
    bodies = [_spec(rng, rng.randrange(6)) for _ in range(60)]
    for body in bodies:
        await cluster.call("POST", "/api/v1/namespaces/default/pods", body)
    names = [b["metadata"]["name"] for b in bodies]

    def settled() -> bool:
        return all(
            (p := cluster.pod(n)) is not None
            and (
                p["spec"].get("nodeName") or cluster.condition(p, "PodScheduled", "reason") == "Unschedulable"
            )
            for n in names
        )

    await cluster.until(settled)
    scheduler = scheduler_of(cluster.sim.controllers)
    placed: dict[str, Counter[str]] = {}
    for name in names:
        p = cluster.pod(name)
        node = p["spec"].get("nodeName")
        if node is None:
            assert all(scheduler.fit_reasons(p, f"n{i}") for i in range(9)), name
            continue
        group = p["metadata"]["labels"]["app"]
        key = node if int(group[1:]) % 3 == 0 else cluster.node(node)["metadata"]["labels"][ZONE]
        placed.setdefault(group, Counter())[key] += 1
    assert any(cluster.pod(n)["spec"].get("nodeName") is None for n in names)  # the burst overflowed
    for group, counts in placed.items():
        kind = int(group[1:]) % 3
        if kind == 0:
            assert max(counts.values()) == 1, (group, counts)  # one per host
        elif kind == 1:
            zones = [counts.get(z, 0) for z in "abc"]
            assert max(zones) - min(zones) <= 1, (group, counts)
