"""The embedded AWS process: a patched moto server on 127.0.0.1 and the box's control plane beside it.

    python -m sagebox.box.embedded_aws.server --port N --state-dir DIR [--mode processes|containers]
        [--registry-host 127.0.0.1:P --registry-ca CA.pem] [--docker-host unix://...]

SIGTERM stops every endpoint instance (SageMaker's SIGTERM, then SIGKILL after 30 s), then the server.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from sagebox.box.embedded_aws.config import ACCESS_KEY, ACCOUNT, EmbeddedAwsConfig

log = logging.getLogger("sagebox.aws")


def apply_patches(config: EmbeddedAwsConfig) -> None:
    """Every patch of moto that the box needs (see the package docstring and infra/README.md)."""
    from infra.catalog import instances
    from sagebox.box.embedded_aws import cloudformation, kms, sagemaker

    sagemaker.accept_instance_types(instances())
    sagemaker.endpoint_lifecycle()
    sagemaker.omit_empty_objects()
    cloudformation.apply()
    kms.apply()
    if config.registry_host and config.registry_ca:
        from sagebox.box.embedded_aws import ecr
        from sagebox.box.registry import RegistryClient

        ecr.apply(RegistryClient(config.registry_host, config.registry_ca))


def make_launcher(config: EmbeddedAwsConfig) -> Any:
    from container.env import available_cpus
    from sagebox.box.fleet import ContainerLauncher, ProcessLauncher

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


def serve(config: EmbeddedAwsConfig, stop: threading.Event) -> int:
    import boto3
    from moto.sagemaker.models import sagemaker_backends
    from moto.server import ThreadedMotoServer

    from sagebox.box.embedded_aws import cloudformation, sagemaker
    from sagebox.box.reconciler import Reconciler

    apply_patches(config)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=config.port, verbose=False)
    server.start()
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{config.port}",
        region_name=config.region,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )
    reconciler = Reconciler(
        lambda: sagemaker_backends[ACCOUNT][config.region],
        make_launcher(config),
        s3,
        config.state_dir,
        settle=cloudformation.settle,
    )
    sagemaker.on_change(reconciler.notify)
    loop = threading.Thread(target=reconciler.run, args=(stop,), name="control-plane", daemon=True)
    loop.start()
    log.info("embedded AWS on %s (%s mode)", config.url, config.mode)
    stop.wait()
    log.info("stopping: endpoints first, then the embedded AWS")
    loop.join(timeout=5)
    reconciler.shutdown()
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
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return serve(config, stop)


if __name__ == "__main__":
    sys.exit(main())
