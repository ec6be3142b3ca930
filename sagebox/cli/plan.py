"""`sagebox plan CONFIG`: which inf2/trn1 sizes and tensor-parallel degrees a decoder LLM fits, and what a token costs
there and on c6i, from its config.json alone: an estimate (neuron_emu.llm.cost; docs/llm-plan.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagebox.errors import SageboxError

if TYPE_CHECKING:
    from infra.catalog import PriceTable
    from neuron_emu.llm.config import DecoderConfig
    from neuron_emu.llm.cost.plan import LlmPlan

DEFAULT_MAX_SEQUENCE = 2048  # the default context, as `sagebox compile --max-length` takes it
DTYPES = ("bf16", "fp16", "fp32")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="estimate which inf2/trn1 sizes a decoder LLM fits and its cost per token there and on c6i (config only)",
    )
    p.add_argument(
        "config",
        metavar="CONFIG",
        help="a config.json, a folder holding one, or a Hugging Face Hub id (org/name[@revision]: only its "
        "config.json is downloaded, under HF_HOME / HF_HUB_OFFLINE / HF_TOKEN / HF_ENDPOINT as for builds)",
    )
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="weights and KV cache on NeuronCores (default bf16)")
    p.add_argument(
        "--seq-len",
        type=int,
        help="tokens of one request, prompt (half) and answer (half) (default: the model's context, at most 2048)",
    )
    p.add_argument(
        "--pad-heads",
        action="store_true",
        help="project degrees NxD refuses (heads not divisible) as transformers-neuronx pads them, marked padded",
    )
    p.add_argument("--prices", type=Path, help="price table for $ per million tokens (default: infra/data/prices.json)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON instead of a table")
    p.set_defaults(func=run)


# --- the config ------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SageboxError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SageboxError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SageboxError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(raw, dict):
        raise SageboxError(f"{path} is not a config.json (a JSON object)")
    return raw


def _from_hub(spec: str) -> tuple[dict[str, Any], str]:
    """config.json alone from the Hub (or the Hugging Face cache), under the build's Hub settings and messages."""
    from sagebox.pipeline.load.sources import HubSettings, explain, one_line, parse_hub_id

    parsed = parse_hub_id(spec)
    assert parsed is not None
    repo_id, revision = parsed
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import RemoteEntryNotFoundError
    except ImportError:
        raise SageboxError(
            f"{spec} is a Hugging Face Hub id: install huggingface_hub (pip install 'sagebox[build]')"
        ) from None
    settings = HubSettings.from_env()
    where = "the Hugging Face cache (HF_HUB_OFFLINE is set)" if settings.offline else settings.endpoint
    print(f"reading config.json of {spec} from {where}", file=sys.stderr)
    try:
        path = hf_hub_download(
            repo_id,
            "config.json",
            revision=revision,
            cache_dir=settings.cache_dir,
            endpoint=settings.endpoint,
            token=settings.token,
            local_files_only=settings.offline,
        )
    except RemoteEntryNotFoundError:  # the repository has no such file (a missing cache entry is another error)
        raise SageboxError(f"{spec} has no config.json: not a transformers model") from None
    except Exception as exc:  # huggingface_hub, httpx and the file system each raise their own types
        raise SageboxError(one_line(explain(exc, repo_id, revision, spec, settings))) from None
    return _read_json(Path(path)), f"{spec} (config.json from the Hub)"


def load_config(spec: str) -> tuple[dict[str, Any], str]:
    """(the config dict, where it came from): a file, a folder's config.json, else a Hub id."""
    from sagebox.pipeline.load.sources import is_hub_id

    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SageboxError(f"folder {path} holds no config.json")
        return _read_json(path / "config.json"), str(path / "config.json")
    if path.exists() or spec.endswith(".json"):
        return _read_json(path), str(path)
    if not is_hub_id(spec):
        raise SageboxError(f"{spec} is neither a config.json, a folder holding one, nor a Hub id (org/name)")
    return _from_hub(spec)


def decoder(raw: dict[str, Any], where: str) -> DecoderConfig:
    from neuron_emu.llm.config import UnsupportedModel, read_config

    try:
        return read_config(raw)
    except UnsupportedModel as exc:
        raise SageboxError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SageboxError(f"{where}: not a decoder config this planner reads ({exc})") from None


# --- the plan --------------------------------------------------------------------------------------------------


def build_plan(
    config: DecoderConfig, *, dtype: str, sequence: int | None, pad_heads: bool, prices: PriceTable
) -> LlmPlan:
    from infra.catalog import instances
    from neuron_emu.llm.cost.constants import CostError, load_constants
    from neuron_emu.llm.cost.cpu import CpuInstance, cpu_plan
    from neuron_emu.llm.cost.neuron import neuron_plan
    from neuron_emu.llm.cost.plan import LlmPlan, constants_summary, model_summary
    from neuron_emu.llm.cost.timing import split_request

    seq = sequence if sequence is not None else min(config.max_positions, DEFAULT_MAX_SEQUENCE)
    constants = load_constants()
    cpus = [
        CpuInstance(spec.name, spec.vcpus, spec.memory_gib) for spec in instances().values() if spec.family == "c6i"
    ]
    try:
        prompt, output = split_request(seq)
        neuron = neuron_plan(
            config, dtype=dtype, sequence=seq, constants=constants, prices=prices.per_hour, pad_heads=pad_heads
        )
        cpu = cpu_plan(config, cpus, sequence=seq, constants=constants, prices=prices.per_hour)
    except CostError as exc:
        raise SageboxError(str(exc)) from None
    return LlmPlan(
        model=model_summary(config, dtype),
        dtype=dtype,
        sequence=seq,
        prompt=prompt,
        output=output,
        pad_heads=pad_heads,
        neuron=neuron,
        cpu=cpu,
        constants=constants_summary(constants),
    )


def run(args: argparse.Namespace) -> int:
    from infra.catalog import load_prices
    from neuron_emu.llm.cost.plan import render

    if args.seq_len is not None and args.seq_len < 2:
        raise SageboxError(f"--seq-len must be at least 2 (a prompt and an answer), got {args.seq_len}")
    raw, where = load_config(args.config)
    config = decoder(raw, where)
    prices = load_prices(args.prices)
    plan = build_plan(config, dtype=args.dtype, sequence=args.seq_len, pad_heads=args.pad_heads, prices=prices)
    price_note = {"source": prices.source, "region": prices.region, "currency": prices.currency, "as_of": prices.as_of}
    if args.json:
        print(json.dumps({**plan.to_dict(), "config": where, "prices": price_note}, indent=2, sort_keys=True))
        return 0
    print(f"config: {where}")
    print(render(plan), end="")
    print(
        f"prices: {prices.source} ({prices.region}, {prices.as_of}); '-' in $/M tok: no price for that instance type "
        "in the table (--prices FILE gives another)"
    )
    return 0
