"""A ``Metrics`` registry read back as Prometheus would scrape it (its text exposition parsed by
prometheus_client's own parser): one helper for the tests that check what a metric says."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kubespot.observability.metrics import Metrics

Labels = frozenset[tuple[str, str]]


def samples(metrics: Metrics) -> dict[tuple[str, Labels], float]:
    """Every sample in the rendered text, keyed by (sample name, labels)."""
    out: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(metrics.render()[0].decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    """One sample's value (None when the series does not exist)."""
    return samples(metrics).get((name, frozenset(labels.items())))


def created(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    """``kubespot_nodeclaims_created_total`` by (nodepool, capacity type, reason)."""
    return {
        (dict(labels)["nodepool"], dict(labels)["capacity_type"], dict(labels)["reason"]): v
        for (name, labels), v in samples(metrics).items()
        if name == "kubespot_nodeclaims_created_total"
    }
