"""Benchmarks and their reports: models side by side (latency, size, INT8 against FP32 and the peers), endpoints
(P50/P90/P99, QPS, $ per million queries), the serving path and cold start, Neuron cost plans, and faults
(faults/); each writes a results JSON with the machine's CPU beside its figures (scripts/bench_*.py run them)."""
