"""The embedded AWS process: a patched moto server on 127.0.0.1 and the box's control plane beside it.

    python -m sagebox.box.embedded_aws.server --port N --state-dir DIR [--mode processes|containers]
        [--registry-host 127.0.0.1:P --registry-ca CA.pem] [--docker-host unix://...] [--time-scale S]

The time scale (default: SAGEBOX_BOX_TIME_SCALE, else 1) shortens every wait of the box's SageMaker, CloudWatch
and Application Auto Scaling (see config.TIME_SCALE_ENV). On every control-plane pass the alarms are evaluated on
the metrics the runtime gateway published, and the target tracking policies run.

SIGTERM stops every endpoint instance (SageMaker's SIGTERM, then SIGKILL after 30 s), then the server.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagebox.box.embedded_aws.config import (
    ACCESS_KEY,
    ACCOUNT,
    EmbeddedAwsConfig,
    EndpointFile,
    time_scale,
    write_endpoint_file,
)
from sagebox.box.invocation_metrics import FLUSH_S
from sagebox.errors import SageboxError

log = logging.getLogger("sagebox.aws")


def apply_patches(config: EmbeddedAwsConfig) -> None:
    """Every patch of moto that the box needs (see the package docstring and infra/README.md)."""
    from infra.catalog import instances
    from sagebox.box.embedded_aws import autoscaling, cloudformation, cloudwatch, kms, logs, sagemaker, sns_dedupe

    sagemaker.accept_instance_types(instances())
    sagemaker.endpoint_lifecycle()
    sagemaker.omit_empty_objects()
    sagemaker.capture_summary()
    sagemaker.endpoint_config_features()
    cloudformation.apply()
    kms.apply()
    cloudwatch.apply()
    logs.apply()
    autoscaling.apply()
    sns_dedupe.apply()
    if config.registry_host and config.registry_ca:
        from sagebox.box.embedded_aws import ecr
        from sagebox.box.registry import RegistryClient

        ecr.apply(RegistryClient(config.registry_host, config.registry_ca))


def make_launcher(config: EmbeddedAwsConfig) -> Any:
    from container.env import available_cpus
    from sagebox.box.containers import ContainerLauncher
    from sagebox.box.fleet import ProcessLauncher

    if config.mode == "processes":
        return ProcessLauncher(config.state_dir / "logs" / "endpoints", available_cpus())
    import docker

    from sagebox.box.registry import RegistryClient

    client = docker.DockerClient(base_url=config.docker_host, version="auto", timeout=900)
    host = config.registry_host or ""
    registry = RegistryClient(host, config.registry_ca) if host and config.registry_ca else None

    def resolve_digest(reference: str) -> str | None:
        if registry is None or not reference.startswith(f"{host}/"):
            return None
        repository, _, tag = reference[len(host) + 1 :].rpartition(":")
        found = registry.manifest(repository, tag)
        return found[0] if found else None

    return ContainerLauncher(client, config.registry_host, resolve_digest)


# Metrics of a period keep arriving this long after it ends (the gateway publishes once a second).
INGEST_DELAY_S = FLUSH_S + 0.5
PRUNE_EVERY_S = 60.0


def control_pass(config: EmbeddedAwsConfig, scale: float, firing: dict[str, str]) -> tuple[Callable[[], None], Any]:
    """What runs first on every control-plane pass: alarm evaluation (the states guardrails read, kept in
    `firing`), target tracking, and dropping metrics past CloudWatch's retention. (The pass, the autoscaler.)"""
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.sagemaker.models import sagemaker_backends

    from sagebox.box.embedded_aws import cloudwatch
    from sagebox.box.embedded_aws.autoscaling import Autoscaler

    scaler = Autoscaler(
        ACCOUNT, config.region, lambda: sagemaker_backends[ACCOUNT][config.region], scale, INGEST_DELAY_S
    )
    pruned = [time.time()]

    def on_pass() -> None:
        now = time.time()
        metrics = cloudwatch_backends[ACCOUNT][config.region]
        found = cloudwatch.evaluate_alarms(metrics, now, scale, INGEST_DELAY_S)
        firing.clear()
        firing.update(found)
        scaler.tick(now)
        if now - pruned[0] > PRUNE_EVERY_S:
            pruned[0] = now
            cloudwatch.prune(metrics, now - cloudwatch.RETENTION_S * scale)

    return on_pass, scaler


def serve(config: EmbeddedAwsConfig, stop: threading.Event) -> int:
    import boto3
    from moto.logs.models import logs_backends
    from moto.sagemaker.models import sagemaker_backends
    from moto.server import ThreadedMotoServer

    from sagebox.box.embedded_aws import cloudformation, sagemaker
    from sagebox.box.endpoint_logs import LogCap, LoggedLauncher, LogShipper, MotoLogs, events_per_stream
    from sagebox.box.reconciler import Reconciler

    scale = config.time_scale if config.time_scale is not None else time_scale(os.environ)
    apply_patches(config)
    snapshots = None
    if config.persist:  # the previous box's state first, before anything answers (nothing lost when a box dies)
        from sagebox.box.embedded_aws import persistence

        snapshots = persistence.Snapshots(persistence.snapshot_dir(config.state_dir))
        restored = snapshots.restore()
        if restored:
            recovered = persistence.recover_endpoints(sagemaker_backends[ACCOUNT][config.region])
            log.info("restored %s; endpoints deployed again: %s", ", ".join(restored), ", ".join(recovered) or "none")
    # Before the server answers: whoever waits for it (sagebox up) then starts the gateway, which reads this.
    write_endpoint_file(config.state_dir, EndpointFile(f"http://127.0.0.1:{config.port}", config.region, scale))
    if snapshots is not None:
        server = persistence.persistent_server(snapshots, "127.0.0.1", config.port)
        persistence.run_periodically(snapshots, stop)
    else:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=config.port, verbose=False)
    server.start()
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{config.port}",
        region_name=config.region,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )
    firing: dict[str, str] = {}
    on_pass, _ = control_pass(config, scale, firing)
    # Every instance's output in the embedded CloudWatch Logs, as SageMaker writes it (sagebox.box.endpoint_logs).
    shipper = LogShipper(MotoLogs(lambda: logs_backends[ACCOUNT][config.region], LogCap(events_per_stream(os.environ))))
    shipper.start()
    reconciler = Reconciler(
        lambda: sagemaker_backends[ACCOUNT][config.region],
        LoggedLauncher(make_launcher(config), shipper),
        s3,
        config.state_dir,
        settle=cloudformation.settle,
        time_scale=scale,
        alarms=lambda: dict(firing),
        on_pass=on_pass,
        note=shipper.note,
        before_fleet=snapshots.save_quietly if snapshots is not None else lambda: None,
    )
    sagemaker.on_change(reconciler.notify)
    loop = threading.Thread(target=reconciler.run, args=(stop,), name="control-plane", daemon=True)
    loop.start()
    log.info("embedded AWS on %s (%s mode, time scale %g)", config.url, config.mode, scale)
    stop.wait()
    log.info("stopping: endpoints first, then the embedded AWS")
    loop.join(timeout=5)
    reconciler.shutdown()
    shipper.stop()  # the stopped instances' last lines
    server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sagebox's embedded AWS (patched moto server + control plane)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--mode", choices=["processes", "containers"], default="processes")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--registry-host")
    parser.add_argument("--registry-ca", type=Path)
    parser.add_argument("--docker-host")
    parser.add_argument("--time-scale", type=float, help="box time scale (default: $SAGEBOX_BOX_TIME_SCALE, else 1)")
    parser.add_argument("--persist", action="store_true", help="snapshot the state and restore it at start")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stdout)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    config = EmbeddedAwsConfig(
        port=args.port,
        state_dir=args.state_dir,
        mode=args.mode,
        region=args.region,
        registry_host=args.registry_host,
        registry_ca=args.registry_ca,
        docker_host=args.docker_host,
        time_scale=args.time_scale,
        persist=args.persist,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        return serve(config, stop)
    except SageboxError as exc:
        print(f"sagebox embedded AWS: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
