"""The NeuronCore-v2 cost model: a per-op roofline estimate of every traced graph, per instance type."""
