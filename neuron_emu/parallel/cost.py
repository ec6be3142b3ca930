"""The tensor-parallel plan: per instance type, which degrees fit and how long a request takes at each.

An ESTIMATE, not a measurement. Per degree d on an instance:
- compute: the roofline latency of one rank's graphs (neuron_emu's cost plans), as replicated + sharded / d;
- collectives: 2 all-reduces per layer of the hidden-state partial sums, each a ring all-reduce over the d cores
  (2 (d - 1) hops, each a fixed hop latency plus 1/d of the message over the slowest link the ring crosses:
  the intra-chip path while d fits one chip, NeuronLink once it spans chips);
- memory: replicated weights + sharded weights / d against one core's share of its chip's HBM;
- throughput: cores // d model replicas, each serving batch-size requests per latency.
Link figures come from neuron_emu/data/interconnect.json (published or marked as assumptions there), chips,
cores and HBM from neuron_emu.hardware (data/neuron_instances.json).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from neuron_emu.hardware import NeuronInstance, neuron_instances
from neuron_emu.paths import DATA_DIR

GIB = 1024**3
INTERCONNECT_FILE = DATA_DIR / "interconnect.json"
ASSUMPTIONS = (
    "Estimate only: compute from neuron_emu's roofline cost plans of the shard graphs, collectives from published "
    "link figures (neuron_emu/data/interconnect.json); nothing here was measured on Neuron hardware.",
    "Compute at degree d = replicated + sharded / d, fitted to the plans of rank 0's graphs at the traced degree "
    "and one other degree (exact while no op's activations cross the SBUF size between the two).",
    "Two all-reduces per layer (after the attention output and the second feed-forward projection), each a ring "
    "all-reduce: 2 (d - 1) hops of (hop latency + message / d / link bandwidth); ranks fill a chip's cores first, so "
    "d <= cores per chip stays on-chip and larger d crosses NeuronLink, which then bounds every hop.",
    "No overlap of collectives with compute; the host sends the inputs to every core and reads rank 0's outputs "
    "(host transfers and launch overhead are not modelled, as in the single-core plan).",
    "Embeddings, LayerNorms, the projections' biases and the head (every parameter outside the encoder's layers) "
    "are replicated on every core; weights are stored as auto-cast stores them (fp32 matmul weights in the cast type).",
    "A core's HBM share is its chip's HBM divided by the chip's cores; only weights are counted against it.",
)


@dataclass(frozen=True)
class InstanceLinks:
    """One Neuron instance type's chips and the links between its cores."""

    instance_type: str
    chip: str
    chips: int
    cores_per_chip: int
    hbm_bytes_per_core: float
    intra_chip_bytes_per_s: float
    neuronlink_bytes_per_s: float | None
    hop_latency_us: float
    topology: str

    @property
    def cores(self) -> int:
        return self.chips * self.cores_per_chip


def parse_interconnect(
    raw: Mapping[str, Any], instances: Mapping[str, NeuronInstance] | None = None
) -> dict[str, InstanceLinks]:
    """Join the link figures of `raw` (interconnect.json's layout) to the instances' chips (neuron_emu.hardware)."""
    known = dict(neuron_instances()) if instances is None else dict(instances)
    links = raw["chips"]
    out: dict[str, InstanceLinks] = {}
    for name, entry in raw["instances"].items():
        instance = known.get(name)
        if instance is None:
            raise ValueError(f"interconnect figures for {name}, which neuron_emu.hardware does not know")
        chip = instance.chip
        link = entry.get("neuronlink_gib_per_s_per_chip")
        out[name] = InstanceLinks(
            instance_type=name,
            chip=chip.name,
            chips=instance.chips,
            cores_per_chip=chip.cores_per_chip,
            hbm_bytes_per_core=chip.hbm_gib * GIB / chip.cores_per_chip,
            intra_chip_bytes_per_s=float(links[chip.name]["intra_chip_gib_per_s"]) * GIB,
            neuronlink_bytes_per_s=float(link) * GIB if link is not None else None,
            hop_latency_us=float(links[chip.name]["hop_latency_us"]),
            topology=str(entry["topology"]),
        )
    return out


@cache
def interconnect(path: Path = INTERCONNECT_FILE) -> dict[str, InstanceLinks]:
    """The instance types of `path` (default: neuron_emu/data/interconnect.json) with their chips."""
    return parse_interconnect(json.loads(Path(path).read_text()))


def chips_spanned(degree: int, links: InstanceLinks) -> int:
    return math.ceil(degree / links.cores_per_chip)


def allreduce_us(message_bytes: float, degree: int, links: InstanceLinks) -> tuple[float, str]:
    """(time of one ring all-reduce of `message_bytes` over `degree` cores, the link that bounds it)."""
    if degree <= 1:
        return 0.0, "none"
    if degree > links.cores:
        raise ValueError(f"{degree} cores exceed the {links.cores} of {links.instance_type}")
    if chips_spanned(degree, links) == 1:
        bandwidth, link = links.intra_chip_bytes_per_s, "intra-chip"
    else:
        if links.neuronlink_bytes_per_s is None:
            raise ValueError(f"{links.instance_type} has no chip-to-chip link")
        bandwidth, link = min(links.intra_chip_bytes_per_s, links.neuronlink_bytes_per_s), "NeuronLink"
    hops = 2 * (degree - 1)
    return hops * (links.hop_latency_us + message_bytes / degree / bandwidth * 1e6), link


@dataclass(frozen=True)
class ShardProfile:
    """What one compile knows about the sharded model, independent of instance types."""

    model: dict[str, Any]
    batch_size: int
    sequence_length: int
    compiler_args: str
    traced_degree: int
    candidate_degrees: list[int]
    compute_replicated_us: float
    compute_sharded_us: float
    replicated_weight_bytes: int
    sharded_weight_bytes: int
    allreduces: int
    allreduce_bytes: int

    def compute_us(self, degree: int) -> float:
        return self.compute_replicated_us + self.compute_sharded_us / degree

    def weight_bytes_per_core(self, degree: int) -> float:
        return self.replicated_weight_bytes + self.sharded_weight_bytes / degree


@dataclass(frozen=True)
class DegreeCost:
    degree: int
    chips: int
    link: str
    compute_us: float
    collective_us: float
    latency_us: float
    weight_bytes_per_core: float
    fits: bool
    replicas: int
    inferences_per_s: float


@dataclass(frozen=True)
class InstancePlan:
    instance_type: str
    neuron_cores: int
    chips: int
    hbm_bytes_per_core: float
    degrees: list[DegreeCost]
    fitting_degrees: list[int]
    fastest_degree: int | None
    smallest_fitting_degree: int | None

    def at(self, degree: int) -> DegreeCost | None:
        return next((d for d in self.degrees if d.degree == degree), None)


@dataclass(frozen=True)
class ParallelPlan:
    profile: ShardProfile
    instances: list[InstancePlan]
    fits_one_core: bool
    degree_to_fit: int | None
    summary: list[str]
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))
    estimate: bool = True

    def instance(self, instance_type: str) -> InstancePlan:
        for plan in self.instances:
            if plan.instance_type == instance_type:
                return plan
        raise KeyError(instance_type)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ParallelPlan:
        return cls(
            profile=ShardProfile(**raw["profile"]),
            instances=[
                InstancePlan(**{**i, "degrees": [DegreeCost(**d) for d in i["degrees"]]}) for i in raw["instances"]
            ],
            fits_one_core=bool(raw["fits_one_core"]),
            degree_to_fit=raw["degree_to_fit"],
            summary=list(raw["summary"]),
            assumptions=list(raw.get("assumptions", ASSUMPTIONS)),
            estimate=bool(raw.get("estimate", True)),
        )

    def to_text(self) -> str:
        return render(self)


def _degree_cost(profile: ShardProfile, degree: int, links: InstanceLinks) -> DegreeCost:
    collective, link = allreduce_us(profile.allreduce_bytes, degree, links)
    collective *= profile.allreduces
    compute = profile.compute_us(degree)
    latency = compute + collective
    replicas = links.cores // degree
    weights = profile.weight_bytes_per_core(degree)
    return DegreeCost(
        degree=degree,
        chips=chips_spanned(degree, links),
        link=link,
        compute_us=compute,
        collective_us=collective,
        latency_us=latency,
        weight_bytes_per_core=weights,
        fits=weights <= links.hbm_bytes_per_core,
        replicas=replicas,
        inferences_per_s=replicas * profile.batch_size / (latency * 1e-6) if latency > 0 else 0.0,
    )


def _gib(value: float) -> str:
    return f"{value / GIB:.2f} GiB" if value >= GIB / 10 else f"{value / 1024**2:.1f} MiB"


def parallel_plan(profile: ShardProfile, links: Mapping[str, InstanceLinks] | None = None) -> ParallelPlan:
    """The per-instance table for `profile` (links default to neuron_emu/data/interconnect.json)."""
    table = dict(interconnect()) if links is None else dict(links)
    instances: list[InstancePlan] = []
    for spec in table.values():
        costs = [_degree_cost(profile, d, spec) for d in profile.candidate_degrees if d <= spec.cores]
        fitting = [c for c in costs if c.fits]
        instances.append(
            InstancePlan(
                instance_type=spec.instance_type,
                neuron_cores=spec.cores,
                chips=spec.chips,
                hbm_bytes_per_core=spec.hbm_bytes_per_core,
                degrees=costs,
                fitting_degrees=[c.degree for c in fitting],
                fastest_degree=min(fitting, key=lambda c: (c.latency_us, c.degree)).degree if fitting else None,
                smallest_fitting_degree=fitting[0].degree if fitting else None,
            )
        )
    core_share = min((spec.hbm_bytes_per_core for spec in table.values()), default=0.0)
    largest = max((spec.cores for spec in table.values()), default=1)
    one_core = profile.weight_bytes_per_core(1)
    fits_one_core = one_core <= core_share
    degree_to_fit = next(
        (d for d in profile.candidate_degrees if d <= largest and profile.weight_bytes_per_core(d) <= core_share),
        None,
    )
    summary = [
        f"weights per core at tp_degree 1: {_gib(one_core)} ({_gib(profile.replicated_weight_bytes)} replicated on "
        f"every core + {_gib(profile.sharded_weight_bytes)} divided among the cores); a NeuronCore's HBM share: "
        f"{_gib(core_share)}"
    ]
    if fits_one_core:
        summary.append("the model fits one NeuronCore: tensor parallelism is optional (it trades replicas for latency)")
    elif degree_to_fit is not None:
        summary.append(
            f"the model does NOT fit one NeuronCore; tp_degree {degree_to_fit} makes it fit "
            f"({_gib(profile.weight_bytes_per_core(degree_to_fit))} per core)"
        )
    else:
        summary.append(
            "the model does NOT fit one NeuronCore, and no degree its heads allow makes it fit "
            f"(degrees {profile.candidate_degrees}, largest instance {largest} cores)"
        )
    for plan in instances:
        if plan.fastest_degree is None:
            summary.append(f"{plan.instance_type}: no degree fits")
            continue
        best = plan.at(plan.fastest_degree)
        assert best is not None
        summary.append(
            f"{plan.instance_type}: degrees that fit {', '.join(str(d) for d in plan.fitting_degrees)}; fastest "
            f"tp_degree {best.degree} ({best.latency_us / 1000:.3f} ms per request, {best.replicas} replica(s))"
        )
    return ParallelPlan(
        profile=profile,
        instances=instances,
        fits_one_core=fits_one_core,
        degree_to_fit=degree_to_fit,
        summary=summary,
    )


def render(plan: ParallelPlan) -> str:
    p = plan.profile
    lines = [
        "neuron_emu tensor-parallel plan - an ESTIMATE from a roofline model and published link figures, "
        "not a measurement",
        f"model: {p.model.get('model_type')} {p.model.get('layers')} layers, hidden {p.model.get('hidden')}, "
        f"{p.model.get('heads')} heads; batch {p.batch_size}, sequence {p.sequence_length}; "
        f"compiler args: {p.compiler_args}; traced at tp_degree {p.traced_degree}",
        f"per request: {p.allreduces} all-reduces of {p.allreduce_bytes / 1024:.1f} KiB; compute "
        f"{p.compute_replicated_us:.1f} us replicated + {p.compute_sharded_us:.1f} us / degree",
        "",
        *plan.summary,
        "",
        f"{'instance':<18} {'degree':>6} {'chips':>5} {'link':<10} {'compute':>10} {'collect.':>10} "
        f"{'latency':>10} {'weights/core':>13} {'fits':>4} {'replicas':>8} {'inf/s':>9}",
    ]
    for instance in plan.instances:
        for d in instance.degrees:
            lines.append(
                f"{instance.instance_type:<18} {d.degree:>6} {d.chips:>5} {d.link:<10} {d.compute_us:>8.1f}us "
                f"{d.collective_us:>8.1f}us {d.latency_us:>8.1f}us {_gib(d.weight_bytes_per_core):>13} "
                f"{'yes' if d.fits else 'NO':>4} {d.replicas:>8} {d.inferences_per_s:>9.0f}"
            )
    lines += ["", "assumptions:"] + [f"  - {a}" for a in plan.assumptions]
    return "\n".join(lines) + "\n"


def fit_compute(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(replicated, sharded) compute so that time(d) = replicated + sharded / d passes through two (d, time) points."""
    if len(points) < 2:
        (_, only), *_ = points
        return only, 0.0
    (d1, t1), (d2, t2) = points[0], points[1]
    if d1 == d2:
        raise ValueError("two different degrees are needed to separate replicated from sharded compute")
    sharded = (t1 - t2) / (1.0 / d1 - 1.0 / d2)
    sharded = max(0.0, sharded)
    replicated = max(0.0, t1 - sharded / d1)
    return replicated, sharded
