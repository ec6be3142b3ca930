"""Cost maths: $ per million queries from an hourly price and a throughput, and relative $/performance."""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


def cost_per_million(price_per_hour: float, qps: float, instances: int = 1) -> float:
    """Dollars for one million queries on `instances` instances each serving `qps` queries per second."""
    if price_per_hour < 0:
        raise ValueError("price per hour must be >= 0")
    if qps <= 0:
        raise ValueError("throughput must be > 0 to price a query")
    hours_per_million = 1_000_000 / (qps * SECONDS_PER_HOUR)
    return price_per_hour * instances * hours_per_million


def relative_cost_performance(costs: dict[str, float], baseline: str) -> dict[str, float]:
    """Each row's $ per query divided by the baseline row's: 0.5 means half the cost for the same work."""
    if baseline not in costs:
        raise KeyError(f"baseline {baseline!r} is not among {sorted(costs)}")
    base = costs[baseline]
    if base <= 0:
        raise ValueError("baseline cost must be > 0")
    return {name: cost / base for name, cost in costs.items()}
