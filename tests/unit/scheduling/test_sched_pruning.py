"""Search pruning and valuation in the simulation (docs/designs/provisioning.md, decision 3)."""

from __future__ import annotations

from kubespot.scheduling.simulate import market_prices, undominated
from support.catalog import itype


def test_dominated_types_are_left_out_per_capacity_type() -> None:
    big_cheap = itype("big-cheap", 8, 32, od=0.30, spot=0.20)
    small_dear = itype("small-dear", 4, 16, od=0.35, spot=0.10)  # dominated on-demand, not spot
    lopsided = itype("lopsided", 16, 8, od=0.40)  # more CPU than big-cheap: kept
    books = {
        "on-demand": {"big-cheap": 0.30, "small-dear": 0.35, "lopsided": 0.40},
        "spot": {"big-cheap": 0.20, "small-dear": 0.10},
    }
    assert [t.name for t in undominated([big_cheap, small_dear, lopsided], books)] == [
        "big-cheap",
        "small-dear",
        "lopsided",
    ]
    assert [t.name for t in undominated([big_cheap, small_dear], {"on-demand": books["on-demand"]})] == [
        "big-cheap"
    ]


def test_market_prices_recover_a_linear_catalog() -> None:
    per_core, per_gib = 0.02, 0.005
    types = [
        itype(f"t{c}-{m}", c, m, od=c * per_core + m * per_gib)
        for c, m in ((2, 4), (4, 32), (16, 32), (8, 8))
    ]
    prices = market_prices(types, {"on-demand": {t.name: t.offerings[0].price for t in types}})
    assert prices is not None
    assert abs(prices["cpu"] * 1000 - per_core) < 1e-9
    assert abs(prices["memory"] * 2**30 - per_gib) < 1e-9


def test_market_prices_refuse_a_degenerate_fit() -> None:
    t = itype("only", 2, 8, od=0.1)
    assert market_prices([t], {"on-demand": {"only": 0.1}}) is None
