"""imdssim: an EC2 instance metadata service (IMDS) simulator for tests, the sandbox and game days.

Serves IMDSv1/v2 metadata for a fleet of simulated instances from one aiohttp server, with spot
interruption, rebalance, scheduled-event and ASG lifecycle signals that appear and change over
(injectable) time, a JSON control endpoint, and fault injection. Self-contained: it imports nothing
from kubespot outside this package. See docs/simulators/imdssim.md.
"""

from kubespot.sim.imdssim.clock import Clock, FakeClock, system_clock
from kubespot.sim.imdssim.events import (
    AsgTransition,
    RebalanceRecommendation,
    ScheduledEvent,
    SpotInterruption,
)
from kubespot.sim.imdssim.faults import Fault, FaultError, parse_fault_spec
from kubespot.sim.imdssim.fleet import Fleet, UnknownInstance
from kubespot.sim.imdssim.instance import SimInstance, synthetic_instance
from kubespot.sim.imdssim.scenario import (
    EventSpec,
    InstanceSpec,
    Scenario,
    ScenarioError,
    apply_scenario,
    load_scenario,
)
from kubespot.sim.imdssim.server import ImdsSim
from kubespot.sim.imdssim.thread import ImdsSimThread

__all__ = [
    "AsgTransition",
    "Clock",
    "EventSpec",
    "FakeClock",
    "Fault",
    "FaultError",
    "Fleet",
    "ImdsSim",
    "ImdsSimThread",
    "InstanceSpec",
    "RebalanceRecommendation",
    "Scenario",
    "ScenarioError",
    "ScheduledEvent",
    "SimInstance",
    "SpotInterruption",
    "UnknownInstance",
    "apply_scenario",
    "load_scenario",
    "parse_fault_spec",
    "synthetic_instance",
    "system_clock",
]
