"""Fault specs (CLI form and JSON form) and which requests a fault fires on."""

from __future__ import annotations

import pytest

from kubespot.sim.imdssim.faults import (
    DEFAULT_TIMEOUT_SECONDS,
    Fault,
    FaultError,
    FaultSet,
    fault_from_mapping,
    parse_fault_spec,
)


def test_parse_cli_forms() -> None:
    f = parse_fault_spec("error,status=503,rate=0.25,path=/latest/meta-data/spot,instance=i-0abc,count=2")
    assert (f.kind, f.status, f.rate, f.path, f.instance_id, f.count) == (
        "error",
        503,
        0.25,
        "/latest/meta-data/spot",
        "i-0abc",
        2,
    )
    assert parse_fault_spec("latency,2.5").seconds == 2.5
    assert parse_fault_spec("token,503").status == 503
    assert parse_fault_spec("timeout").seconds == DEFAULT_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "explode",
        "error,status=200",
        "error,status=abc",
        "error,rate=2",
        "latency,seconds=-1",
        "error,path=latest",
        "error,colour=red",
        "error,count=1.5",
        "latency,seconds=nan",
    ],
)
def test_bad_specs_are_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(FaultError) as info:
        parse_fault_spec(spec)
    assert str(info.value)


def test_mapping_form_rejects_wrong_types() -> None:
    with pytest.raises(FaultError):
        fault_from_mapping({"kind": "error", "status": True})
    with pytest.raises(FaultError):
        fault_from_mapping({"kind": 5})
    with pytest.raises(FaultError):
        fault_from_mapping({"kind": "error", "instance_id": 7})


def test_scope_by_instance_path_and_token() -> None:
    faults = FaultSet(lambda: 0.0)
    faults.add(Fault(kind="error", instance_id="i-1", path="/latest/meta-data/spot"))
    faults.add(Fault(kind="token", status=503))
    assert faults.trigger("i-2", "/latest/meta-data/spot/instance-action", token_request=False) == []
    assert faults.trigger("i-1", "/latest/meta-data/instance-id", token_request=False) == []
    assert [f.kind for f in faults.trigger("i-1", "/latest/meta-data/spot/x", token_request=False)] == [
        "error"
    ]
    assert [f.status for f in faults.trigger("i-9", "/latest/api/token", token_request=True)] == [503]


def test_rate_uses_the_random_source_and_count_is_a_budget() -> None:
    rolls = iter([0.1, 0.9, 0.1, 0.1])
    faults = FaultSet(lambda: next(rolls))
    faults.add(Fault(kind="error", rate=0.5, count=2))
    fired = [bool(faults.trigger("i-1", "/", token_request=False)) for _ in range(4)]
    assert fired == [True, False, True, False]


def test_add_remove_clear() -> None:
    faults = FaultSet(lambda: 0.0)
    fid = faults.add(Fault(kind="latency", seconds=1))
    assert [f.fault_id for f in faults.all()] == [fid]
    assert faults.remove(fid) and not faults.remove(fid)
    faults.add(Fault(kind="error"))
    faults.clear()
    assert faults.all() == []
