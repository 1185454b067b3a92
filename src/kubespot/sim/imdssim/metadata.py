"""The metadata tree of one instance at one instant, and path lookup in it.

Leaves are text bodies; directories list their children one per line, sub-directories with a
trailing ``/``. An item whose signal is absent (no spot notice yet, no rebalance, not in an ASG) is
left out of the tree, so it is a 404 and is missing from its parent's listing, as on EC2.
"""

from __future__ import annotations

import json
from typing import Any, Union

from kubespot.sim.imdssim.instance import SimInstance

Tree = dict[str, Union[str, "Tree"]]

# Dated versions are served with the same tree as ``latest``; clients that pin a version still work.
VERSIONS: tuple[str, ...] = (
    "1.0",
    "2007-01-19",
    "2008-09-01",
    "2009-04-04",
    "2011-01-01",
    "2012-01-12",
    "2014-02-25",
    "2016-09-02",
    "2018-09-24",
    "2020-10-27",
    "2021-07-15",
    "2022-09-24",
    "latest",
)


def _compact(obj: Any) -> str:
    return json.dumps(obj)


def _pretty(obj: Any) -> str:
    # The identity document comes pretty-printed from EC2; clients parse it, people read it.
    return json.dumps(obj, indent=2)


def _prune(tree: Tree) -> Tree:
    """Drop directories that ended up empty: EC2 does not list a category with nothing in it."""
    out: Tree = {}
    for key, node in tree.items():
        if isinstance(node, dict):
            node = _prune(node)
            if not node:
                continue
        out[key] = node
    return out


def version_tree(instance: SimInstance, now: float) -> Tree:
    """Everything under ``/latest/`` for ``instance`` as IMDS would show it at ``now``."""
    spot = instance.spot_at(now)
    rebalance = instance.rebalance_at(now)
    scheduled = instance.scheduled_at(now)
    asg_state = instance.asg_state_at(now)
    finished = [e.body(now) for e in scheduled if e.state_at(now) != "active"]

    meta: Tree = {
        "ami-id": instance.ami_id,
        "hostname": instance.local_hostname,
        "instance-id": instance.instance_id,
        "instance-life-cycle": instance.life_cycle,
        "instance-type": instance.instance_type,
        "local-hostname": instance.local_hostname,
        "local-ipv4": instance.private_ip,
        "mac": instance.mac,
        "placement": {"availability-zone": instance.availability_zone, "region": instance.region},
        "services": {"domain": "amazonaws.com", "partition": "aws"},
        "events": {
            "maintenance": {
                "scheduled": _compact([e.body(now) for e in scheduled]),
                "history": _compact(finished),
            },
            "recommendations": {"rebalance": _compact(rebalance.body())} if rebalance else {},
        },
        "spot": (
            {
                "instance-action": _compact(spot.instance_action()),
                "termination-time": spot.instance_action()["time"],
            }
            if spot
            else {}
        ),
        "autoscaling": {"target-lifecycle-state": asg_state} if asg_state is not None else {},
    }
    tree: Tree = {
        "meta-data": meta,
        "dynamic": {"instance-identity": {"document": _pretty(instance.identity_document())}},
    }
    if instance.user_data is not None:
        tree["user-data"] = instance.user_data
    return _prune(tree)


def listing(tree: Tree) -> str:
    return "\n".join(key + "/" if isinstance(node, dict) else key for key, node in sorted(tree.items()))


def lookup(instance: SimInstance, now: float, path: str) -> str | None:
    """The body IMDS returns for ``path`` (instance-relative, e.g. ``/latest/meta-data/``).

    ``None`` means 404.
    """
    parts = path.split("/")
    if parts[:1] != [""]:
        return None
    parts = parts[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]  # a trailing slash asks for the same node
    if not parts:
        return "\n".join(VERSIONS)
    version, rest = parts[0], parts[1:]
    if version not in VERSIONS or "" in rest:
        return None
    node: str | Tree = version_tree(instance, now)
    for part in rest:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return listing(node) if isinstance(node, dict) else node
