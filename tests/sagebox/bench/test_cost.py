"""Cost maths and the price table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import CatalogError, load_prices
from sagebox.bench.cost import cost_per_million, relative_cost_performance


def test_cost_per_million_by_hand() -> None:
    # $3.60/h at 10 QPS: 1e6 queries take 1e5 s = 27.78 h -> $100.
    assert cost_per_million(3.6, 10.0) == pytest.approx(100.0)
    assert cost_per_million(3.6, 10.0, instances=2) == pytest.approx(200.0)
    assert cost_per_million(0.408, 20.0) == pytest.approx(0.408 * 1e6 / (20 * 3600))


@pytest.mark.parametrize(("price", "qps"), [(1.0, 0.0), (1.0, -2.0), (-1.0, 1.0)])
def test_cost_rejects_impossible_inputs(price: float, qps: float) -> None:
    with pytest.raises(ValueError):
        cost_per_million(price, qps)


def test_relative_cost_performance() -> None:
    rel = relative_cost_performance({"fp32": 4.0, "int8": 1.0, "neuron": 2.0}, baseline="fp32")
    assert rel == {"fp32": 1.0, "int8": 0.25, "neuron": 0.5}
    with pytest.raises(KeyError):
        relative_cost_performance({"a": 1.0}, baseline="b")


def test_bundled_price_table_is_dated_sourced_and_complete() -> None:
    table = load_prices()
    for instance in ("ml.c5.2xlarge", "ml.c6i.2xlarge", "ml.inf2.xlarge", "ml.trn1.2xlarge"):
        assert table.hourly(instance) > 0
    assert table.source.startswith("https://aws.amazon.com/")
    assert table.as_of[:4].isdigit() and table.currency == "USD"
    with pytest.raises(CatalogError, match="no price"):
        table.hourly("ml.p5.48xlarge")


def test_price_table_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text("{")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_prices(bad)
    bad.write_text(json.dumps({"per_hour": {"ml.x": 1}}))
    with pytest.raises(CatalogError, match="lacks a valid field"):
        load_prices(bad)
    bad.write_text(json.dumps({"per_hour": {"ml.x": 0}, "source": "s", "region": "r", "currency": "USD", "as_of": "d"}))
    with pytest.raises(CatalogError, match="non-positive"):
        load_prices(bad)
    with pytest.raises(CatalogError, match="does not exist"):
        load_prices(tmp_path / "missing.json")
