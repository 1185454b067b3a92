"""lbsim: a simulated load balancer in front of kubesim pods, with ELBv2 target groups from moto.

It sends a steady stream of simulated requests to the targets AWS says are routable and judges each
one by what the cluster shows (docs/simulators/lbsim.md). Independent of the other simulators: it
reaches kubesim and moto over HTTP only.
"""

from __future__ import annotations

from .balancer import (
    ControllerModel,
    Deregistration,
    HealthCheck,
    HealthEvent,
    LoadBalancerResult,
    LoadBalancerSim,
    SecondCount,
    TargetGroup,
    TargetView,
)
from .cluster import EXCLUDE_LABEL, ClusterView, Reason

__all__ = [
    "EXCLUDE_LABEL",
    "ClusterView",
    "ControllerModel",
    "Deregistration",
    "HealthCheck",
    "HealthEvent",
    "LoadBalancerResult",
    "LoadBalancerSim",
    "Reason",
    "SecondCount",
    "TargetGroup",
    "TargetView",
]
