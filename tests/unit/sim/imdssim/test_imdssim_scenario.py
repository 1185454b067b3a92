"""Scenario files: parsing, validation messages, and the fleet they build over (fake) time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubespot.sim.imdssim.clock import FakeClock
from kubespot.sim.imdssim.fleet import Fleet
from kubespot.sim.imdssim.metadata import lookup
from kubespot.sim.imdssim.scenario import (
    EventSpec,
    Scenario,
    ScenarioError,
    apply_scenario,
    load_scenario,
)

EXAMPLE = {
    "instances": [
        {
            "instance_id": "i-0123456789abcdef0",
            "instance_type": "c5.xlarge",
            "events": [
                {"kind": "spot-itn", "after_seconds": 5, "action": "hibernate"},
                {"kind": "rebalance", "at": "2026-11-20T16:00:02Z"},
                {
                    "kind": "scheduled",
                    "code": "system-reboot",
                    "event_id": "instance-event-1",
                    "not_before_in": 600,
                    "state_changes": [{"after_seconds": 60, "state": "canceled"}],
                },
                {"kind": "asg-terminated", "after_seconds": 3},
            ],
        },
        {"life_cycle": "on-demand", "require_v2": True},
    ],
    "faults": [{"kind": "error", "status": 503, "path": "/latest/meta-data/spot"}],
}


def _applied(data: object) -> tuple[Fleet, FakeClock]:
    clock = FakeClock()
    fleet = Fleet(clock=clock)
    apply_scenario(fleet, Scenario.read(data))
    return fleet, clock


def test_example_builds_a_fleet_with_timed_signals() -> None:
    fleet, clock = _applied(EXAMPLE)
    first, second = fleet.instances()
    assert first.instance_type == "c5.xlarge" and second.life_cycle == "on-demand"
    assert fleet.requires_v2(second) and not fleet.requires_v2(first)
    t0 = clock()
    spot = "/latest/meta-data/spot/instance-action"
    assert lookup(first, t0 + 4, spot) is None
    assert json.loads(lookup(first, t0 + 5, spot) or "") == {
        "action": "hibernate",
        "time": "2026-11-20T16:02:05Z",
    }
    assert lookup(first, t0 + 2, "/latest/meta-data/events/recommendations/rebalance") is not None
    asg = "/latest/meta-data/autoscaling/target-lifecycle-state"
    assert (lookup(first, t0 + 2, asg), lookup(first, t0 + 3, asg)) == ("InService", "Terminated")
    sched = "/latest/meta-data/events/maintenance/scheduled"
    assert json.loads(lookup(first, t0 + 59, sched) or "")[0]["State"] == "active"
    (event,) = json.loads(lookup(first, t0 + 60, sched) or "")
    assert event["State"] == "canceled" and event["NotBefore"] == "20 Nov 2026 16:10:00 GMT"
    assert [f.status for f in fleet.faults.all()] == [503]


def test_instances_without_ids_get_distinct_synthetic_ones() -> None:
    fleet, _ = _applied({"instances": [{}, {}, {}]})
    assert len({i.instance_id for i in fleet.instances()}) == 3


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ([], "scenario: expected an object"),
        ({"instancez": []}, "unknown keys instancez"),
        ({"instances": {}}, "scenario.instances: expected a list"),
        ({"instances": [{"instance_type": 5}]}, "instances[0].instance_type"),
        ({"instances": [{"events": [{"kind": "meteor"}]}]}, "instances[0].events[0].kind"),
        (
            {"instances": [{"events": [{"kind": "spot-itn", "action": "explode"}]}]},
            "instances[0].events[0].action",
        ),
        ({"instances": [{"events": [{"kind": "spot-itn", "after_seconds": -1}]}]}, "after_seconds"),
        ({"instances": [{"events": [{"kind": "rebalance", "at": "soon"}]}]}, "instances[0].events[0].at"),
        ({"instances": [{"events": [{"kind": "rebalance", "at": 1, "after_seconds": 1}]}]}, "not both"),
        (
            {"instances": [{"events": [{"kind": "scheduled", "state_changes": [{}]}]}]},
            "state_changes[0].state",
        ),
        ({"instances": [{"events": [{"kind": "asg-lifecycle", "state": "Sleeping"}]}]}, "events[0].state"),
        ({"instances": [{"life_cycle": "reserved"}]}, "instances[0].life_cycle"),
        ({"instances": [{"require_v2": "yes"}]}, "instances[0].require_v2"),
        ({"faults": [{"kind": "error", "status": 99}]}, "faults[0]"),
    ],
)
def test_invalid_scenarios_name_the_offending_key(data: object, where: str) -> None:
    with pytest.raises(ScenarioError) as info:
        Scenario.read(data)
    assert where in str(info.value)


def test_bad_identity_values_are_scenario_errors() -> None:
    with pytest.raises(ScenarioError, match="instance id"):
        _applied({"instances": [{"instance_id": "web-1"}]})
    with pytest.raises(ScenarioError):
        _applied({"instances": [{"private_ip": "10.0.0.300"}]})
    with pytest.raises(ScenarioError, match="already exists"):
        _applied({"instances": [{"instance_id": "i-1"}, {"instance_id": "i-1"}]})


def test_event_spec_defaults_to_now() -> None:
    spec = EventSpec.read({"kind": "spot-itn"})
    assert spec.when.resolve(100.0) == 100.0 and spec.action == "terminate"


def test_load_json_and_yaml_files(tmp_path: Path) -> None:
    js = tmp_path / "s.json"
    js.write_text(json.dumps(EXAMPLE))
    assert len(load_scenario(js).instances) == 2
    pytest.importorskip("yaml")
    ym = tmp_path / "s.yaml"
    ym.write_text(
        "instances:\n  - instance_id: i-0aaa\n    events:\n      - {kind: rebalance, after_seconds: 1}\n"
    )
    loaded = load_scenario(ym)
    assert loaded.instances[0].fields["instance_id"] == "i-0aaa"
    assert loaded.instances[0].events[0].kind == "rebalance"


def test_file_errors_are_scenario_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(bad)
    badyaml = tmp_path / "bad.yml"
    badyaml.write_text("a: [1, 2\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(badyaml)
