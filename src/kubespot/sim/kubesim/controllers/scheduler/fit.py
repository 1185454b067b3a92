"""Does this pod fit this node, given the pods on it, and if not, why: the node-local filters alone.

A pure function for callers that ask "what if" without the scheduler's state (preemption asks it
with a node's pods minus the victims): NodeAffinity's PreFilterResult, NodeUnschedulable,
TaintToleration, NodeAffinity, NodePorts and NodeResourcesFit, in the default profile's order,
returning the failing plugin's reasons as the Unschedulable message counts them. The filters that
need the whole cluster (volumes, topology spread, inter-pod affinity) are in
``SchedulerController.fit_reasons``, which adds them to this one.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...store import Obj
from .interpod import REASON_AFFINITY as REASON_POD_AFFINITY
from .nodes import REASON_NOT_IN_PRE_FILTER, Usage, node_info, pre_filter_node_names, required_node_terms
from .nodes import static_reason as _static_reason
from .ports import REASON_PORTS, conflicts, host_ports
from .resources import insufficient, pod_request
from .spread import REASON_MISSING_LABEL
from .volumes import UNRESOLVABLE as _VOLUME_UNRESOLVABLE

_TERMINAL = ("Succeeded", "Failed")


def usage_of(pods: Iterable[Obj]) -> Usage:
    """The requests and host ports of the non-terminal ``pods`` (upstream's NodeInfo sums)."""
    u = Usage()
    for p in pods:
        if (p.get("status") or {}).get("phase") in _TERMINAL:
            continue
        spec = p.get("spec") or {}
        r = pod_request(spec)
        u.cpu, u.mem, u.eph, u.pods = u.cpu + r.cpu, u.mem + r.mem, u.eph + r.eph, u.pods + 1
        u.nz_cpu, u.nz_mem = u.nz_cpu + r.nz_cpu, u.nz_mem + r.nz_mem
        for name, amount in r.scalars:
            u.scalars[name] += amount
        for port in host_ports(spec):
            u.ports[port] += 1
    return u


def node_reasons(pod: Obj, node: Obj, pods: Iterable[Obj]) -> list[str]:
    """The reasons ``pod`` does not fit ``node`` with ``pods`` bound to it ([]: it fits)."""
    spec = pod.get("spec") or {}
    n = node_info(node, usage_of(pods))
    terms = required_node_terms(spec)
    only = pre_filter_node_names(terms)
    if only is not None and n.name not in only:
        return [REASON_NOT_IN_PRE_FILTER]
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    reason = _static_reason(n, list(spec.get("tolerations") or []), selector, terms)
    if reason is not None:
        return [reason]
    ports = host_ports(spec)
    if ports and conflicts(ports, n.usage.ports):
        return [REASON_PORTS]
    return insufficient(pod_request(spec), n.alloc, n.usage)


_RESOLVABLE_PREFIXES = ("Insufficient ", "Too many pods", REASON_PORTS)


def unresolvable(reason: str) -> bool:
    """Whether a reason is UnschedulableAndUnresolvable upstream (preemption cannot help), as
    opposed to Unschedulable (resources, ports, anti-affinity, topology skew)."""
    if reason.startswith(_RESOLVABLE_PREFIXES):
        return False
    if reason in (REASON_POD_AFFINITY, REASON_MISSING_LABEL) or reason in _VOLUME_UNRESOLVABLE:
        return True
    # Cordon, taints, node affinity, PreFilter results and rejections are unresolvable; the
    # remaining InterPodAffinity and PodTopologySpread reasons are not.
    return not reason.startswith(("node(s) didn't match pod", "node(s) didn't satisfy existing"))
