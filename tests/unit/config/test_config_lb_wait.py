"""The drain's wait for load-balancer deregistration: the agent's own switch, the controller's
derivation from its loadbalancer group, and the values refused at start-up."""

from __future__ import annotations

import pytest

from kubespot.config.agent import AgentSettings
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import SettingsError, load
from kubespot.model import Kind


def test_off_by_default_everywhere() -> None:
    agent = load(AgentSettings, env={"KUBESPOT_NODE_NAME": "n"})
    assert not agent.loadbalancer_wait.enabled
    assert not agent.loadbalancer_wait.applies(Kind.SPOT_INTERRUPTION)
    controller = load(ControllerSettings, env={"KUBESPOT_QUEUE_URL": "https://sqs.example/q"})
    assert not controller.drain_wait.enabled


def test_the_agent_waits_for_its_kinds_only() -> None:
    agent = load(
        AgentSettings,
        env={
            "KUBESPOT_NODE_NAME": "n",
            "KUBESPOT_LOADBALANCER_WAIT_ENABLED": "true",
            "KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY": "45s",
            "KUBESPOT_LOADBALANCER_WAIT_KINDS": "spot-itn",
        },
    )
    wait = agent.loadbalancer_wait
    assert wait.max_delay == 45.0
    assert wait.applies(Kind.SPOT_INTERRUPTION) and not wait.applies(Kind.SCHEDULED_MAINTENANCE)


def test_a_deregistering_controller_waits_for_the_kinds_it_deregisters() -> None:
    controller = load(
        ControllerSettings,
        env={"KUBESPOT_LOADBALANCER_ENABLED": "true", "KUBESPOT_LOADBALANCER_KINDS": "spot-itn,state-change"},
    )
    assert controller.drain_wait.enabled
    assert controller.drain_wait.kinds == {Kind.SPOT_INTERRUPTION, Kind.STATE_CHANGE}
    assert controller.drain_wait.max_delay == controller.loadbalancer_wait.max_delay == 30.0
    # Its own group, once switched on, is taken as it is.
    explicit = load(
        ControllerSettings,
        env={
            "KUBESPOT_LOADBALANCER_ENABLED": "true",
            "KUBESPOT_LOADBALANCER_WAIT_ENABLED": "true",
            "KUBESPOT_LOADBALANCER_WAIT_KINDS": "asg-lifecycle-termination",
        },
    )
    assert explicit.drain_wait.kinds == {Kind.ASG_LIFECYCLE}


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY": "-1"}, "loadbalancer_wait.max_delay"),
        (
            {"KUBESPOT_LOADBALANCER_WAIT_ENABLED": "true", "KUBESPOT_LOADBALANCER_WAIT_KINDS": "[]"},
            "loadbalancer_wait.kinds",
        ),
    ],
)
def test_values_that_cannot_work_are_refused(env: dict[str, str], setting: str) -> None:
    with pytest.raises(SettingsError, match=setting.replace(".", r"\.")):
        load(AgentSettings, env={"KUBESPOT_NODE_NAME": "n", **env})
