"""`sagebox infra`: check the deployment targets (no CDK, no node), or synthesize every stack in-process."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command imports infra lazily: `sagebox --help` stays fast
    from infra.plan import EndpointPlan
    from infra.settings import AppSettings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("infra", help="check deployment targets, or synthesize the CDK stacks in-process")
    actions = p.add_subparsers(dest="infra_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate every target and print what each endpoint will run and cost")
    _settings_arguments(check)
    check.add_argument("--prices", type=Path, help="price table (default: infra/data/prices.json)")
    check.set_defaults(func=run_check)
    synth = actions.add_parser("synth", help="synthesize every stack (cdk-nag included) and report the time taken")
    _settings_arguments(synth)
    synth.add_argument("--outdir", type=Path, default=Path("cdk.out"), help="cloud assembly directory")
    synth.add_argument(
        "--cfn-validate", action="store_true", help="also run CDK's CloudFormation schema validation (slower)"
    )
    synth.set_defaults(func=run_synth)


def _settings_arguments(p: argparse.ArgumentParser) -> None:
    """The same knobs as the CDK context keys (`cdk synth -c targets=...`)."""
    p.add_argument("--targets", help="targets file (default: infra/targets.json)")
    p.add_argument("--model-dir", help="directory relative model_data paths are resolved against")
    p.add_argument("--only", help="comma-separated target names")
    p.add_argument("--prefix", help="stack and endpoint name prefix (default: sagebox)")
    p.add_argument("--image-uri", help="image URI for every target instead of its own image")
    p.add_argument("--model-data", help="per-target model data: target=s3://...,target=s3://...")
    p.add_argument(
        "--allow-emulated",
        action="store_true",
        help="accept neuron_emu-compiled models on inf2/trn1 (CPU inference at accelerator prices; the box does)",
    )


def _settings(args: argparse.Namespace) -> AppSettings:
    from infra.settings import AppSettings

    context = {
        "targets": args.targets,
        "model_dir": args.model_dir,
        "only": args.only,
        "prefix": args.prefix,
        "image_uri": args.image_uri,
        "model_data": args.model_data,
        "allow_emulated": True if args.allow_emulated else None,  # None: the SAGEBOX_ALLOW_EMULATED fallback holds
        "cfn_validate": getattr(args, "cfn_validate", False),
    }
    return AppSettings.from_context({k: v for k, v in context.items() if v is not None}, Path.cwd())


def _hourly(plan: EndpointPlan, per_hour: dict[str, float]) -> str:
    price = per_hour.get(plan.instance.name)
    if price is None:
        return "no price"
    scaling = plan.target.autoscaling
    low = plan.target.instance_count if scaling is None else scaling.min_instances
    high = plan.target.instance_count if scaling is None else scaling.max_instances
    return f"${price * low:.2f}/h" if low == high else f"${price * low:.2f}-{price * high:.2f}/h"


def _size(size_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


def describe(plan: EndpointPlan, prices: dict[str, float]) -> list[str]:
    from infra.plan import LocalModel

    model = plan.model
    where = str(model.path) if isinstance(model, LocalModel) else model.uri
    size = "size unknown" if plan.model_size_bytes is None else _size(plan.model_size_bytes)
    target = plan.target
    scaling, capture = target.autoscaling, target.data_capture
    rollout = f"canary of {plan.canary_instances} instance" if plan.canary_instances else "all at once"
    storage = "KMS-encrypted volume" if plan.volume_kms else "instance-store NVMe (hardware-encrypted)"
    scaled = f", autoscaling {scaling.min_instances}-{scaling.max_instances}" if scaling else ", no autoscaling"
    return [
        f"{plan.name}: {plan.endpoint_name} on {plan.instance.name}, {plan.variant}, {_hourly(plan, prices)}",
        f"  model    {where} ({size})",
        f"  scaling  {target.instance_count} instance(s){scaled}",
        f"  deploy   blue/green {rollout}, bake {target.deployment.bake_s} s, "
        f"rollback on p90 > {target.alarms.latency_p90_ms:g} ms or 5xx",
        f"  storage  {storage}" + (f", data capture {capture.sampling_percent} %" if capture else ""),
    ]


def run_check(args: argparse.Namespace) -> int:
    from infra.catalog import load_prices
    from infra.plan import plan_endpoints
    from infra.targets import load_target_files

    settings = _settings(args)
    plans = plan_endpoints(load_target_files(settings.targets_files), settings)
    prices = load_prices(args.prices)
    for plan in plans:
        print("\n".join(describe(plan, prices.per_hour)))
    print(f"{len(plans)} target(s) OK; prices: {prices.source} ({prices.region}, {prices.as_of})")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    from infra.app import build

    settings = _settings(args)
    assembly = build(settings, outdir=args.outdir).synth()
    seconds = time.perf_counter() - started
    for stack in assembly.stacks:
        print(f"{stack.stack_name}: {len(stack.template.get('Resources', {}))} resources")
    print(f"synthesized {len(assembly.stacks)} stacks into {args.outdir} in {seconds:.1f} s (imports included)")
    return 0
