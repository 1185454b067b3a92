"""NTH's deprecated environment names, read as NTH reads them.

NTH's pkg/config/config.go (aws/aws-node-termination-handler, commit 62a8761) still reads
``GRACE_PERIOD``, ``CHECK_ASG_TAG_BEFORE_DRAINING`` and ``MANAGED_ASG_TAG``: each is used only when
its replacement (``POD_TERMINATION_GRACE_PERIOD``, ``CHECK_TAG_BEFORE_DRAINING``, ``MANAGED_TAG``)
is not provided ("Using the newer argument"). NTH's own queue-mode Deployment renders both the old
and the new tag names, so a raw NTH manifest carries both.
"""

from __future__ import annotations

from kubespot.config.agent import AgentSettings
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import load


def test_check_asg_tag_before_draining_alone_turns_the_tag_check_off() -> None:
    s = load(ControllerSettings, env={"CHECK_ASG_TAG_BEFORE_DRAINING": "false"})
    assert s.queue.check_tag_before_draining is False


def test_the_newer_check_tag_name_wins_over_the_deprecated_one() -> None:
    env = {"CHECK_ASG_TAG_BEFORE_DRAINING": "false", "CHECK_TAG_BEFORE_DRAINING": "true"}
    assert load(ControllerSettings, env=env).queue.check_tag_before_draining is True


def test_managed_asg_tag_alone_names_the_managed_tag() -> None:
    s = load(ControllerSettings, env={"MANAGED_ASG_TAG": "team/spot"})
    assert s.queue.managed_tag == "team/spot"
    env = {"MANAGED_ASG_TAG": "team/spot", "MANAGED_TAG": "team/new"}
    assert load(ControllerSettings, env=env).queue.managed_tag == "team/new"


def test_grace_period_alone_sets_the_pod_grace_period_and_the_newer_name_wins() -> None:
    assert (
        load(AgentSettings, env={"NODE_NAME": "n", "GRACE_PERIOD": "45"}).drain.pod_termination_grace_period
        == 45
    )
    env = {"NODE_NAME": "n", "GRACE_PERIOD": "45", "POD_TERMINATION_GRACE_PERIOD": "20"}
    assert load(AgentSettings, env=env).drain.pod_termination_grace_period == 20


def test_nth_downward_api_names_identify_the_pod() -> None:
    # NTH's manifests set POD_NAME and NAMESPACE from the Downward API.
    s = load(AgentSettings, env={"NODE_NAME": "n", "POD_NAME": "nth-abc", "NAMESPACE": "kube-system"})
    assert (s.pod_name, s.pod_namespace) == ("nth-abc", "kube-system")
    c = load(ControllerSettings, env={"POD_NAME": "nth-abc", "NAMESPACE": "kube-system"})
    assert (c.pod_name, c.pod_namespace) == ("nth-abc", "kube-system")
