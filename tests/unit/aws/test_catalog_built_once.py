"""The catalog's scheduling instance types are built once per inputs and kept until the catalog or
its prices change, as aws/karpenter-provider-aws ``pkg/providers/instancetype/instancetype.go``
``List`` keeps its list per node class and input sequence numbers: every provisioning pass asks per
NodePool, and a rebuild of ~1 400 types costs most of a second."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.aws.catalog import Catalog
from support.catalog_aws import M5, CatalogAws
from support.clocks import StillClock


async def test_a_second_ask_is_the_kept_list_and_a_refresh_or_price_change_rebuilds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = Catalog(CatalogAws(), "us-east-1", clock=StillClock(datetime(2026, 1, 1, tzinfo=UTC)))  # type: ignore[arg-type]
    await catalog.refresh()
    (first,) = catalog.instance_types()
    (again,) = catalog.instance_types()
    assert again is first  # kept, not built again
    assert catalog.instance_types(["us-east-1b"]) == []  # other inputs: their own list
    monkeypatch.setitem(M5, "MemoryInfo", {"SizeInMiB": 16384})
    await catalog.refresh()
    (fresh,) = catalog.instance_types()
    assert fresh is not first and catalog.infos()["m5.large"].memory_mib == 16384
    assert fresh.resources.capacity != first.resources.capacity
    catalog.prices._ondemand["m5.large"] = 9.0  # as a Pricing API answer would set it
    catalog.prices.generation += 1
    (priced,) = catalog.instance_types()
    od = next(o for o in priced.offerings if o.capacity_type == "on-demand")
    assert od.price == pytest.approx(9.0)
