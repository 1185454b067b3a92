"""The sandbox's pure parts: the verdict per scenario, the summary it prints, the timing, the cluster."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kubespot.config.queue import QueueSettings
from kubespot.sandbox import cluster, command
from kubespot.sandbox.scenarios import assign_nodes
from kubespot.sandbox.summary import (
    REBALANCE,
    SCHEDULED_REBOOT,
    SPOT_ITN,
    OwnerTrack,
    PodTrack,
    ScenarioRecord,
    judge,
    run_summary,
    scenario_summary,
)
from kubespot.sandbox.timing import Timing
from kubespot.sim.kubesim.controllers import ControllerConfig

T0 = 1_000_000.0


def _spot(**kw: object) -> ScenarioRecord:
    rec = ScenarioRecord(SPOT_ITN, "spot-node-1", "i-0abc", notice_at=T0, deadline=T0 + 30)
    rec.tainted_at = rec.cordoned_at = T0 + 0.4
    rec.pods = {
        "u1": PodTrack(
            "shop", "web-1", "u1", "shop/ReplicaSet/web-1", terminating_at=T0 + 0.5, gone_at=T0 + 2
        ),
        "u2": PodTrack(
            "shop",
            "api-1",
            "u2",
            "shop/ReplicaSet/api-1",
            terminating_at=T0 + 1.9,
            gone_at=T0 + 9.8,
            blocked=3,
            first_blocked_at=T0 + 0.5,
        ),
        "u3": PodTrack("default", "debug", "u3", None, terminating_at=T0 + 0.5, gone_at=T0 + 1),
        "u4": PodTrack("kube-system", "agent", "u4", "kube-system/DaemonSet/agent", daemon=True),
    }
    rec.owners = {
        "shop/ReplicaSet/web-1": OwnerTrack("shop/ReplicaSet/web-1", 4, 4, T0 + 1.0),
        "shop/ReplicaSet/api-1": OwnerTrack("shop/ReplicaSet/api-1", 3, 3, T0 + 3.0),
    }
    for key, value in kw.items():
        setattr(rec, key, value)
    return rec


def test_spot_interruption_met_when_pods_left_and_replicas_run_elsewhere_in_time() -> None:
    rec = _spot()
    assert judge(rec).ok
    s = scenario_summary(rec)
    assert s["ok"] and s["deadline_met"] and s["verdict"] == "met"
    assert s["notice_to_cordon_s"] == pytest.approx(0.4)
    assert s["cordon_latency_s"] == pytest.approx(0.4)
    assert s["evictions"] == 3 and s["pdb_429s"] == 3
    assert s["pdb_wait_max_s"] == pytest.approx(1.4)
    assert (s["pods_to_move"], s["pods_moved"], s["bare_pods_deleted"]) == (2, 2, 1)
    assert s["time_to_empty_s"] == pytest.approx(9.8)
    assert s["margin_s"] == pytest.approx(20.2)
    assert s["pods_on_node"] == 3  # the DaemonSet pod stays and is not counted


def test_spot_interruption_missed_names_the_pod_left_behind_and_why() -> None:
    rec = _spot()
    rec.pods["u2"].gone_at = None
    rec.owners["shop/ReplicaSet/api-1"].restored_at = None
    rec.owners["shop/ReplicaSet/api-1"].ready_elsewhere = 2
    verdict = judge(rec)
    assert not verdict.ok
    assert any("shop/api-1" in r and "PodDisruptionBudget refused 3 evictions" in r for r in verdict.reasons)
    assert any("2/3 replicas running elsewhere" in r for r in verdict.reasons)
    s = scenario_summary(rec)
    assert not s["deadline_met"] and s["margin_s"] is None and s["pods_moved"] == 1


def test_a_pod_gone_after_the_deadline_is_a_miss() -> None:
    rec = _spot()
    rec.pods["u2"].gone_at = T0 + 31
    assert not judge(rec).ok


def test_never_fenced_is_a_miss() -> None:
    rec = _spot(cordoned_at=None)
    verdict = judge(rec)
    assert not verdict.ok and "never cordoned" in verdict.reasons[0]


def test_problems_seen_by_the_driver_fail_the_scenario() -> None:
    rec = _spot(problems=["agent for spot-node-1 exited on its own with code 1"])
    assert judge(rec).reasons == ("agent for spot-node-1 exited on its own with code 1",)


def _rebalance() -> ScenarioRecord:
    rec = ScenarioRecord(REBALANCE, "spot-node-2", "i-0b", notice_at=T0, undo_after=30.0, cleanup_within=2.5)
    rec.tainted_at = rec.cordoned_at = T0 + 0.2
    rec.pods = {"u": PodTrack("shop", "web-2", "u", "shop/ReplicaSet/web-1")}
    rec.uncordoned_at = rec.untainted_at = rec.unannotated_at = T0 + 30.4
    return rec


def test_rebalance_met_when_fenced_not_drained_and_undone_on_time() -> None:
    s = scenario_summary(_rebalance())
    assert s["ok"] and s["undone"] and s["undone_s"] == pytest.approx(30.4)
    assert s["deadline_met"] is None and s["pods_to_move"] == 0 and s["evictions"] == 0


def test_rebalance_that_drains_or_never_undoes_is_a_miss() -> None:
    rec = _rebalance()
    rec.pods["u"].terminating_at = T0 + 1
    assert any("only fences" in r for r in judge(rec).reasons)
    rec = _rebalance()
    rec.uncordoned_at = None
    assert any("still cordoned" in r for r in judge(rec).reasons)
    rec = _rebalance()
    rec.uncordoned_at = rec.untainted_at = rec.unannotated_at = T0 + 5
    assert any("before the undo time" in r for r in judge(rec).reasons)


def _scheduled() -> ScenarioRecord:
    rec = ScenarioRecord(
        SCHEDULED_REBOOT,
        "spot-node-3",
        "i-0c",
        notice_at=T0,
        deadline=T0 + 48,
        act_at=T0 + 10.5,
        cleanup_within=10.0,
    )
    rec.tainted_at = rec.cordoned_at = T0 + 10.6
    rec.pods = {
        "u": PodTrack("shop", "web-3", "u", "shop/ReplicaSet/web-1", terminating_at=T0 + 11, gone_at=T0 + 12)
    }
    rec.owners = {"shop/ReplicaSet/web-1": OwnerTrack("shop/ReplicaSet/web-1", 4, 4, T0 + 11.5)}
    rec.reboot_started_at = T0 + 48
    rec.reboot_done_at = T0 + 53
    rec.uncordoned_at = rec.untainted_at = rec.unannotated_at = T0 + 53.6
    return rec


def test_scheduled_reboot_met() -> None:
    s = scenario_summary(_scheduled())
    assert s["ok"], s["reasons"]
    assert s["cordon_latency_s"] == pytest.approx(0.1)  # counted from NotBefore - lead, not the notice
    assert s["uncordoned_after_reboot"] and s["cleaned_up_s"] == pytest.approx(53.6)
    assert s["margin_s"] == pytest.approx(36.0)


def test_scheduled_reboot_fenced_on_the_announcement_is_a_miss() -> None:
    rec = _scheduled()
    rec.tainted_at = rec.cordoned_at = T0 + 0.3
    assert any("should wait" in r for r in judge(rec).reasons)


def test_scheduled_reboot_not_cleaned_up_after_the_reboot_is_a_miss() -> None:
    rec = _scheduled()
    rec.untainted_at = None
    reasons = judge(rec).reasons
    assert any("kubespot.io/scheduled-maintenance" in r and "after the reboot" in r for r in reasons)
    rec = _scheduled()
    rec.uncordoned_at = T0 + 20  # before the reboot: pods could land on a node about to go down
    assert any("before the reboot" in r for r in judge(rec).reasons)


def test_run_summary_is_ok_only_when_every_scenario_is() -> None:
    good = run_summary([_spot(), _rebalance(), _scheduled()], time_scale=4.0)
    assert good["ok"] and set(good["scenarios"]) == {SPOT_ITN, REBALANCE, SCHEDULED_REBOOT}
    assert good["time_scale"] == 4.0
    bad = run_summary([_spot(cordoned_at=None), _rebalance()])
    assert not bad["ok"]
    assert not run_summary([])["ok"]


def test_timing_compresses_story_seconds_and_keeps_grace_whole() -> None:
    t = Timing(4.0)
    assert t.spot_notice == 30.0
    assert t.grace(30) == 8 and t.grace(1) == 1
    env = t.agent_env()
    assert env["KUBESPOT_IMDS_POLL_INTERVAL"] == "0.25"
    assert env["KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER"] == "30"
    with pytest.raises(ValueError):
        Timing(0.0)


def test_a_node_monitor_grace_below_a_few_lease_renewals_is_refused(tmp_path: Path) -> None:
    """pkg/controller/nodelifecycle/config/types.go ``NodeMonitorGracePeriod``: "must be N times
    more than kubelet's nodeStatusUpdateFrequency"; below 4 of the kubelet's 10 s lease renewals
    (kubesim's ``lease_renew_seconds``, upstream's) healthy nodes would flap Unknown and be tainted
    unreachable, so the sandbox refuses it with a clear error, in both kinds of scenario."""
    assert ControllerConfig().lease_renew_seconds == 10.0
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    workdir = ["--workdir", str(tmp_path)]
    for scenario in ([], ["--scenario", "provision"]):
        for short in ("0", "10", "39.9"):
            args = parser.parse_args([*workdir, *scenario, "--node-monitor-grace-period", short])
            with pytest.raises(ValueError, match=r"at least 40 .*lease renewals"):
                command._options(args)
        ok = parser.parse_args([*workdir, *scenario, "--node-monitor-grace-period", "40"])
        assert command._options(ok).node_monitor_grace == 40.0


def test_every_time_scale_gives_the_controller_a_notice_it_accepts() -> None:
    """EC2 User Guide, "Spot Instance interruption notices": the notice is two minutes, and the
    controller refuses a longer ``queue.interruption_notice``; a simulated EC2 may run faster than
    AWS, never slower, so a time scale below 1 is refused by the sandbox itself."""
    for scale in (1.0, 4.0, 60.0):
        env = Timing(scale).queue_env()
        notice = float(env["KUBESPOT_QUEUE_INTERRUPTION_NOTICE"])
        assert QueueSettings(interruption_notice=notice).interruption_notice == notice
    for slower in (0.5, 0.99):
        with pytest.raises(ValueError, match="between 1 and 60"):
            Timing(slower)


def test_sample_cluster_labels_nodes_as_users_do() -> None:
    objects = cluster.build_objects(3, Timing(4.0))
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    spot = nodes["spot-node-1"]
    labels = spot["metadata"]["labels"]
    assert labels[cluster.CAPACITY_TYPE] == "spot" and labels["lifecycle"] == "Ec2Spot"
    assert (
        spot["spec"]["providerID"]
        == f"aws:///{labels[cluster.ZONE]}/{cluster.instance_id_for('spot-node-1')}"
    )
    assert nodes["od-node-1"]["metadata"]["labels"][cluster.CAPACITY_TYPE] == "on-demand"
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "PodDisruptionBudget", "DaemonSet", "Namespace"} <= kinds
    templates = [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"]
    assert any("volumes" in t for t in templates)  # the emptyDir workload
    assert any("affinity" in t and "tolerations" in t for t in templates)  # the spot-preferring one


def test_spot_interruption_goes_to_the_busiest_node_with_an_empty_dir_pod() -> None:
    def pod(name: str, empty_dir: bool = False) -> dict[str, object]:
        spec: dict[str, object] = {"volumes": [{"name": "s", "emptyDir": {}}]} if empty_dir else {}
        return {"metadata": {"name": name}, "spec": spec}

    pods = {"a": [pod("1"), pod("2"), pod("3")], "b": [pod("1"), pod("2", empty_dir=True)], "c": [pod("1")]}
    assigned = assign_nodes((SPOT_ITN, REBALANCE, SCHEDULED_REBOOT), ["a", "b", "c"], lambda n: pods[n])
    assert assigned == {SPOT_ITN: "b", SCHEDULED_REBOOT: "a", REBALANCE: "c"}


def test_node_lifecycle_timings_are_upstreams_compressed_and_the_flag_changes_the_grace(
    tmp_path: Path,
) -> None:
    """kube-controller-manager's ``--node-monitor-grace-period`` (50 s in v1.32, pkg/controller/
    nodelifecycle ``tryUpdateNodeHealth``) and cloud-controller-manager's ``--node-monitor-period``
    (5 s, cloud-provider controllers/nodelifecycle ``Run``), compressed like every duration: kubesim's
    node lifecycle controller gets the grace; ``--node-monitor-grace-period`` changes it (real-world
    seconds). The queue processor's notice is the market's two minutes, compressed the same way."""
    t = Timing(10.0)
    assert (t.node_monitor_grace, t.node_monitor_period) == (5.0, 0.5)
    assert cluster.controller_config(t).node_monitor_grace_seconds == 5.0
    queue = t.queue_env()
    assert queue["KUBESPOT_QUEUE_INTERRUPTION_NOTICE"] == "12"
    assert queue["KUBESPOT_DRAIN_SAFETY_MARGIN"] == "0.5"
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    workdir = ["--workdir", str(tmp_path)]
    opts = command._options(
        parser.parse_args([*workdir, "--time-scale", "10", "--node-monitor-grace-period", "40"])
    )
    assert opts.node_monitor_grace == 40.0
    provision = parser.parse_args([*workdir, "--scenario", "provision", "--node-monitor-grace-period", "45"])
    assert command._options(provision).node_monitor_grace == 45.0
    assert Timing(10.0, story_node_monitor_grace=45.0).node_monitor_grace == 4.5
    with pytest.raises(ValueError, match="node monitor grace"):
        command._options(parser.parse_args([*workdir, "--node-monitor-grace-period", "-1"]))
