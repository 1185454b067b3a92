"""Fault rules: parsing (the CLI form and JSON), matching, expiry, and the QPS token bucket."""

from __future__ import annotations

import pytest

from kubespot.sim.kubesim.faults import FaultRule, Faults, TokenBucket, parse_rule, rule_from_dict


def test_parse_cli_form() -> None:
    rule = parse_rule("verb=patch, resource=nodes, rate=0.25, code=409, latency=50ms, count=3")
    assert (rule.verb, rule.resource, rule.error_rate, rule.error_code) == ("patch", "nodes", 0.25, 409)
    assert (rule.latency_ms, rule.remaining) == (50.0, 3)
    assert parse_rule("resource=pods,drop_watch_after=30s").drop_watch_after_s == 30.0


@pytest.mark.parametrize(
    "text", ["verb=explode", "rate=2", "code=99", "nonsense", "bogus=1", "rate=abc", "path=("]
)
def test_parse_rejects_bad_rules(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rule(text)


def test_rule_from_dict_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="unknown fault rule fields"):
        rule_from_dict({"verb": "get", "colour": "red"})
    with pytest.raises(ValueError):
        rule_from_dict([1, 2])


def test_matching_by_verb_resource_subresource_and_path() -> None:
    rule = FaultRule(verb="create", resource="pods")
    assert rule.matches("create", "pods/eviction", "/api/v1/namespaces/a/pods/x/eviction")
    assert not rule.matches("get", "pods", "/api/v1/pods")
    only_eviction = FaultRule(resource="pods/eviction")
    assert not only_eviction.matches("create", "pods", "/api/v1/namespaces/a/pods")
    by_path = FaultRule(path=r"/namespaces/kube-system/")
    assert by_path.matches("get", "pods", "/api/v1/namespaces/kube-system/pods/x")
    assert not by_path.matches("get", "pods", "/api/v1/namespaces/default/pods/x")


async def test_rules_expire_after_their_count_and_report_codes() -> None:
    faults = Faults(seed=1)
    faults.add("verb=get,rate=1,code=503,count=2")
    results = [await faults.before("get", "pods", "/api/v1/pods") for _ in range(3)]
    assert [r.code if r else None for r in results] == [503, 503, None]
    assert results[0] is not None and results[0].retry_after == 1
    assert faults.injected == 2 and faults.rules == []


def test_token_bucket_refills_at_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=2, clock=lambda: now[0])
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    now[0] += 0.1
    assert bucket.take() is True
    assert bucket.take() is False


def test_matching_by_query_and_parsing_a_silenced_watch() -> None:
    """``query`` picks one node's list by its field selector; ``stall_watch_after`` silences watches."""
    rule = parse_rule("verb=list,resource=pods,query=spec.nodeName=node-a$,rate=1")
    assert rule.matches("list", "pods", "/api/v1/pods", "fieldSelector=spec.nodeName=node-a")
    assert not rule.matches("list", "pods", "/api/v1/pods", "fieldSelector=spec.nodeName=node-ab")
    assert not rule.matches("list", "pods", "/api/v1/pods")
    faults = Faults()
    faults.add("resource=nodes,stall_watch_after=0")
    assert faults.watch_stall_after("nodes", "/api/v1/nodes") == 0.0
    assert faults.watch_stall_after("pods", "/api/v1/pods") is None
    assert "query" in rule.to_dict() and "_query_re" not in rule.to_dict()
    with pytest.raises(ValueError, match="bad query regex"):
        FaultRule(query="(")
