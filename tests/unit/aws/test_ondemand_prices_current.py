"""The shipped on-demand tables (the catalog's fallback, awssim's data) are what
``scripts/generate_prices.py`` makes of ``shared/data/aws-ondemand-prices.json`` (never edited by
hand), as Karpenter regenerates its ``zz_generated.pricing_aws.go``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kubespot.aws.ondemand_prices import ONDEMAND_PRICES
from kubespot.sim.awssim.price_data import ONDEMAND_PRICES as SIM_PRICES

ROOT = Path(__file__).resolve().parents[3]


def _script() -> object:
    spec = importlib.util.spec_from_file_location("generate_prices", ROOT / "scripts" / "generate_prices.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_prices"] = module
    spec.loader.exec_module(module)
    return module


def test_generated_tables_are_current() -> None:
    script = _script()
    if script.find_data() is None:  # type: ignore[attr-defined]
        pytest.skip("shared/data/aws-ondemand-prices.json is not beside this checkout")
    assert script.main(["--check"]) == 0  # type: ignore[attr-defined]
    assert ONDEMAND_PRICES == SIM_PRICES
    assert len(ONDEMAND_PRICES["us-east-1"]) > 1000
