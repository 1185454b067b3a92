"""The chart's values for the timeline around the drain: notification targets and outgoing HTTP calls
(files mounted from Secrets, for the agent and the controller alike) and the drain's wait for
load-balancer deregistration, which one value, controller.loadBalancer.enabled, switches on for
both workloads of a release."""

from __future__ import annotations

import pytest
from helm_support import Obj, Workload, render

from kubespot.config.agent import AgentSettings
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import load
from kubespot.model import Kind

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/prod-kubespot-interruptions"
SECRETS = {
    "notifyTargetsSecretName": "kubespot-notify",
    "httpCallsSecretName": "kubespot-calls",
    "httpCallsSecretKey": "calls.yaml",
}


def workload(objs: list[Obj], kind: str) -> Obj:
    return Workload(kind).pod_spec(objs)


def env(objs: list[Obj], kind: str) -> dict[str, str]:
    return Workload(kind).plain_env(objs)


def loadable(plain: dict[str, str], **identity: str) -> dict[str, str]:
    return {**plain, **identity}


@pytest.mark.parametrize("kind", ["DaemonSet", "Deployment"])
def test_targets_and_calls_files_are_mounted_from_their_secrets(helm: str, kind: str) -> None:
    objs = render(helm, sets={**SECRETS, "controller.enabled": "true", "queueURL": QUEUE_URL})
    spec = workload(objs, kind)
    values = env(objs, kind)
    assert values["KUBESPOT_NOTIFY_TARGETS_FILE"] == "/etc/kubespot/notify/targets"
    assert values["KUBESPOT_HTTP_CALLS_FILE"] == "/etc/kubespot/http-calls/calls"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["notify-targets"]["secret"]["secretName"] == "kubespot-notify"
    assert volumes["notify-targets"]["secret"]["items"] == [{"key": "targets", "path": "targets"}]
    assert volumes["http-calls"]["secret"]["items"] == [{"key": "calls.yaml", "path": "calls"}]
    (c,) = spec["containers"]
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["notify-targets"] == {
        "name": "notify-targets",
        "mountPath": "/etc/kubespot/notify",
        "readOnly": True,
    }
    assert mounts["http-calls"]["mountPath"] == "/etc/kubespot/http-calls"


def test_nothing_is_mounted_without_the_secrets(helm: str) -> None:
    objs = render(helm)
    values = env(objs, "DaemonSet")
    assert not {"KUBESPOT_NOTIFY_TARGETS_FILE", "KUBESPOT_HTTP_CALLS_FILE"} & set(values)
    assert not any(k.startswith("KUBESPOT_LOADBALANCER_WAIT_") for k in values)
    names = {v["name"] for v in workload(objs, "DaemonSet")["volumes"]}
    assert not {"notify-targets", "http-calls"} & names


def test_the_controllers_load_balancer_switch_turns_the_agents_wait_on(helm: str) -> None:
    objs = render(
        helm,
        sets={
            "controller.enabled": "true",
            "controller.loadBalancer.enabled": "true",
            "controller.loadBalancer.kinds": "{spot-itn,asg-lifecycle-termination}",
        },
    )
    agent = load(AgentSettings, env=loadable(env(objs, "DaemonSet"), KUBESPOT_NODE_NAME="node-a"))
    wait = agent.loadbalancer_wait
    assert wait.enabled and wait.kinds == {Kind.SPOT_INTERRUPTION, Kind.ASG_LIFECYCLE}
    # The controller derives the same from its own loadbalancer settings (nothing rendered for it).
    controller_env = env(objs, "Deployment")
    assert not any(k.startswith("KUBESPOT_LOADBALANCER_WAIT_") for k in controller_env)
    controller = load(ControllerSettings, env=controller_env)
    assert controller.drain_wait.enabled
    assert controller.drain_wait.kinds == {Kind.SPOT_INTERRUPTION, Kind.ASG_LIFECYCLE}


def test_the_agents_wait_can_be_set_on_its_own(helm: str) -> None:
    # The controller deployed by another release: the agent's wait is switched on by hand.
    on = env(
        render(helm, sets={"loadBalancerWaitEnabled": "true", "loadBalancerWaitMaxDelay": "12"}), "DaemonSet"
    )
    assert on["KUBESPOT_LOADBALANCER_WAIT_ENABLED"] == "true"
    assert on["KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY"] == "12"
    assert "KUBESPOT_LOADBALANCER_WAIT_KINDS" not in on
    # And off, even beside a deregistering controller.
    off = env(
        render(
            helm,
            sets={
                "controller.enabled": "true",
                "controller.loadBalancer.enabled": "true",
                "loadBalancerWaitEnabled": "false",
            },
        ),
        "DaemonSet",
    )
    assert off["KUBESPOT_LOADBALANCER_WAIT_ENABLED"] == "false"
    assert "KUBESPOT_LOADBALANCER_WAIT_KINDS" not in off


def test_queue_size_reaches_both(helm: str) -> None:
    objs = render(helm, sets={"notifyQueueSize": "32", "controller.enabled": "true", "queueURL": QUEUE_URL})
    for kind in ("DaemonSet", "Deployment"):
        assert env(objs, kind)["KUBESPOT_NOTIFY_QUEUE_SIZE"] == "32"
