"""Simulated kube-scheduler (see ``controller.py``), one module per plugin: ``nodes`` (NodeUnschedulable,
TaintToleration, NodeAffinity), ``resources`` (NodeResourcesFit), ``ports`` (NodePorts), ``volumes``
(VolumeBinding, VolumeZone), ``spread`` (PodTopologySpread), ``interpod`` (InterPodAffinity) over
``podindex`` (bound pods counted per node); ``fiterror`` (the Unschedulable message) and ``fit``
(does a pod fit a node with given pods: for preemption)."""

from .controller import (
    DEFAULT_SCHEDULER,
    TERMINAL_PHASES,
    SchedulerController,
    pending_reason,
    scheduler_of,
)
from .fit import node_reasons, unresolvable
from .nodes import (
    NOT_READY_TAINT_KEY,
    UNREACHABLE_TAINT_KEY,
    UNSCHEDULABLE_TAINT,
    first_untolerated,
    ready_status,
    taint_reason,
    tolerates,
)
from .resources import pod_requests
from .shapes import num_feasible_nodes_to_find

__all__ = [
    "DEFAULT_SCHEDULER",
    "NOT_READY_TAINT_KEY",
    "TERMINAL_PHASES",
    "UNREACHABLE_TAINT_KEY",
    "UNSCHEDULABLE_TAINT",
    "SchedulerController",
    "first_untolerated",
    "node_reasons",
    "num_feasible_nodes_to_find",
    "pending_reason",
    "pod_requests",
    "ready_status",
    "scheduler_of",
    "taint_reason",
    "tolerates",
    "unresolvable",
]
