"""`sagebox up`: SageMaker in a box, brought up and deployed with the commands a user runs against AWS.

1. the packaged models: yours (`build/models`, or `--models DIR`), else the demo's (built once, cached);
2. with `--containers`: a container engine (Docker, else podman), the offline base image and wheelhouse, and a
   local OCI registry behind the embedded ECR;
3. the embedded AWS (a patched moto server) with the box's control plane, the runtime gateway, and the AWS proxy
   that answers clients building AWS hostnames themselves (sagebox.box.aws_proxy);
4. `cdk bootstrap`, then `cdk deploy` of the endpoint stacks: the real CDK CLI and cdk-assets, with the box's
   environment (`sagebox env`) and CDK context only: model data assets land in the bootstrap bucket, and with
   `--containers` the image asset is built and pushed into the embedded ECR;
5. the control plane does what SageMaker does for each endpoint; `cdk deploy` returns once they are InService.

In process mode the checkout's serving code stands in for the image (no engine, no image build): the stacks
name the artifacts repository's image (`-c image_uri=...`), which the control plane does not pull.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.box import processes
from sagebox.box.embedded_aws.config import ACCOUNT, REGION, EmbeddedAwsConfig
from sagebox.box.reconciler import ROUTES_FILE
from sagebox.box.say import Say
from sagebox.box.state import BoxState, load_state, save_state
from sagebox.errors import SageboxError
from sagebox.local_server import free_port
from sagebox.paths import REPO

DEFAULT_TARGETS = ("c6i-int8", "c6i-fp32", "inf2-neuron")
USER_MODELS = REPO / "build" / "models"
# More targets files, each deployed beside the default targets whenever the packaged models hold its packages (the
# demo's do): the embeddings endpoint (`sagebox build --task feature-extraction --out build/models/embeddings` makes
# yours) and the decoder LLM's (`sagebox build --task text-generation --out build/models/llm`: c6i-llm serves its
# FP32 package, c6i-llm-int8 its INT8 one; inf2-llm serves it compiled for NeuronCores, llm/neuron/model.tar.gz:
# `sagebox compile --model-dir`, not part of the demo's models).
EMBEDDINGS_TARGETS_FILE = REPO / "infra" / "examples" / "embeddings.json"
EMBEDDINGS_TARGETS = ("c6i-embeddings",)
LLM_TARGETS_FILE = REPO / "infra" / "examples" / "llm.json"
LLM_TARGETS = ("c6i-llm", "inf2-llm", "c6i-llm-int8")
EXTRA_TARGET_FILES = (EMBEDDINGS_TARGETS_FILE, LLM_TARGETS_FILE)
TARGET_FILES = (REPO / "infra" / "targets.json", *EXTRA_TARGET_FILES)

# Where packaged models sit in a models folder: <variant>/model.tar.gz, and <model>/<variant>/model.tar.gz for the
# extra targets files' (embeddings/fp32/..., llm/neuron/...).
PACKAGES = ("*/model.tar.gz", "*/*/model.tar.gz")

Step = Callable[[str], Any]


@dataclass(frozen=True)
class UpOptions:
    # None: DEFAULT_TARGETS, and EMBEDDINGS_TARGETS when the packaged models hold the embeddings packages.
    targets: tuple[str, ...] | None = None
    containers: bool = False
    state_dir: Path = Path(".sagebox")
    # Packaged models (<variant>/model.tar.gz); None: build/models when it holds any, else the demo's.
    models: Path | None = None
    # The embedded AWS's time scale (bakes, waits, alarm periods); None: SAGEBOX_BOX_TIME_SCALE, else 1.
    time_scale: float | None = None


def box_clients(state: BoxState, *services: str) -> list[Any]:
    """Clients of the embedded AWS (sagemaker-runtime goes to the gateway)."""
    from sagebox import aws

    options = aws.AwsOptions.for_box(state.region, state.aws_url, state.gateway_url)
    session = aws.session(options)
    return [aws.client(session, service, options) for service in services]


def has_models(folder: Path) -> bool:
    """Whether `folder` holds packaged models: <variant>/model.tar.gz, or an extra targets file's (llm/fp32/...)."""
    return folder.is_dir() and any(next(folder.glob(pattern), None) for pattern in PACKAGES)


def choose_models(options: UpOptions, say: Say) -> tuple[Path, str]:
    """(folder of packaged models, "yours" or "demo")."""
    if options.models is not None:
        if not has_models(options.models):
            raise SageboxError(
                f"{options.models} holds no <variant>/model.tar.gz (nor <model>/<variant>/model.tar.gz): package "
                "models with `sagebox build`"
            )
        return options.models.resolve(), "yours"
    if has_models(USER_MODELS):
        return USER_MODELS, "yours"
    from sagebox.box.artifacts import demo_artifacts

    packages = {tarball.parent.parent for tarball in demo_artifacts(say).tarballs.values()}
    return packages.pop(), "demo"


def default_targets(models: Path) -> tuple[str, ...]:
    """DEFAULT_TARGETS, with each extra file's targets whose packages `models` holds."""
    from infra.targets import load_targets

    extra: list[str] = []
    for path in EXTRA_TARGET_FILES:
        for target in load_targets(path):
            if all((models / data).is_file() for data in [target.model_data, *_variant_data(target)]):
                extra.append(target.name)
    return DEFAULT_TARGETS + tuple(extra)


def _variant_data(target: Any) -> list[str]:
    return [v.model_data for v in target.production_variants or () if v.model_data]


def check_targets(targets: Sequence[str], models: Path) -> tuple[str, ...]:
    """The targets, each known to a targets file (TARGET_FILES) and with its packaged models present in `models`."""
    from infra.targets import load_target_files

    known = {t.name: t for t in load_target_files(TARGET_FILES)}
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise SageboxError(f"unknown target(s) {', '.join(unknown)}; the targets files have {', '.join(known)}")
    missing = [
        f"{name} ({data})"
        for name in targets
        for data in [known[name].model_data, *_variant_data(known[name])]
        if not data.startswith("s3://") and not (models / data).is_file()
    ]
    if missing:
        raise SageboxError(f"{models} lacks the model of target(s) {', '.join(missing)}")
    return tuple(targets)


def targets_context(targets: Sequence[str]) -> list[str]:
    """`-c targets=...` naming the extra targets files whose targets are deployed (none: the app's default file)."""
    from infra.targets import load_targets

    files = [path for path in EXTRA_TARGET_FILES if {t.name for t in load_targets(path)}.intersection(targets)]
    if not files:
        return []
    return ["-c", "targets=" + ",".join(str(path) for path in (TARGET_FILES[0], *files))]


def prepare_containers(state: BoxState, state_dir: Path, say: Say) -> None:
    """Engine, offline base image and wheelhouse (only build arguments), and the registry behind ECR."""
    from sagebox.box import registry
    from sagebox.images.offline import prepare

    build = prepare(say)
    state.docker_host, state.base_image, state.wheelhouse = (
        build.docker_host,
        build.base_image or "",
        build.wheelhouse or "",
    )
    files = registry.RegistryFiles(state_dir / "registry")
    host = f"127.0.0.1:{free_port()}"
    state.registry_pid = registry.start(files, host)
    state.registry_host = host
    say(f"registry on https://{host} (storage {files.storage})")


def start_embedded_aws(
    state: BoxState, state_dir: Path, time_scale: float | None = None, persist: bool = False
) -> None:
    """`persist`: the embedded AWS snapshots its state under `state_dir` and starts from the last snapshot there
    (sagebox.box.embedded_aws.persistence)."""
    config = EmbeddedAwsConfig(
        port=free_port(),
        state_dir=state_dir.resolve(),
        mode="containers" if state.mode == "containers" else "processes",
        region=state.region,
        registry_host=state.registry_host or None,
        registry_ca=(state_dir / "registry" / "tls" / "cert.pem").resolve() if state.registry_host else None,
        docker_host=state.docker_host or None,
        time_scale=time_scale,
        persist=persist,
    )
    log = state_dir / "logs" / "embedded-aws.log"
    pid = processes.spawn(["-m", "sagebox.box.embedded_aws.server", *config.argv()], log)
    state.aws_url, state.aws_pid = config.url, pid
    processes.wait_http(f"http://127.0.0.1:{config.port}/moto-api/", pid, log, timeout=60)


def start_gateway(state: BoxState, state_dir: Path) -> None:
    from sagebox.box import runtime_gateway

    log = state_dir / "logs" / "runtime-gateway.log"
    state.gateway_url, state.gateway_pid = runtime_gateway.spawn(state_dir / ROUTES_FILE, log, state.region)


def start_aws_proxy(state: BoxState, state_dir: Path) -> None:
    from sagebox.box import aws_proxy

    running = aws_proxy.start(state_dir, state.aws_url, state.gateway_url)
    state.aws_proxy_url, state.aws_proxy_pid, state.ca_bundle = running.url, running.pid, str(running.bundle)


def image_uri(state: BoxState) -> str:
    """Process mode: the artifacts repository's image, which the control plane does not pull (see the docstring)."""
    return f"{ACCOUNT}.dkr.ecr.{state.region}.amazonaws.com/sagebox-serving:checkout"


def cdk_context(state: BoxState, targets: Sequence[str]) -> list[str]:
    # The box serves neuron_emu models on inf2/trn1 targets (on the host CPU): its own deploys allow them.
    args = ["-c", f"model_dir={state.models_dir}", "-c", f"only={','.join(targets)}", "-c", "allow_emulated=true"]
    args += targets_context(targets)
    if state.mode == "processes":
        args += ["-c", f"image_uri={image_uri(state)}"]
    return args


def bring_up(options: UpOptions, step: Step) -> BoxState:
    """Run every step; `step(title)` returns a context manager that reports progress for that step."""
    from sagebox.box.cdk_cli import run_cdk
    from sagebox.box.environment import box_environment

    state_dir = options.state_dir
    if options.time_scale is not None:  # one clear line for a bad value, before anything starts
        from sagebox.box.embedded_aws.config import TIME_SCALE_ENV, time_scale

        time_scale({TIME_SCALE_ENV: repr(options.time_scale)})
    existing = load_state(state_dir)
    if existing is not None and existing.aws_pid and processes.alive(existing.aws_pid):
        raise SageboxError("a local box is already running: `sagebox down` first (or use it as it is)")
    if existing is not None:  # a box whose embedded AWS died: stop what it left (gateway, registry, instances)
        from sagebox.box.down import tear_down

        # Its state (the embedded AWS's snapshot, the gateway's async journal) stays: the new box starts from it.
        with step("clear the box whose embedded AWS stopped") as say:
            tear_down(state_dir, say, keep_data=True)
    state = BoxState(region=REGION, mode="containers" if options.containers else "processes")
    targets: tuple[str, ...] = ()
    if options.targets is None or options.targets:
        with step("packaged models") as say:
            models, source = choose_models(options, say)
            state.models_dir, state.models_source = str(models), source
            targets = check_targets(options.targets or default_targets(models), models)
            say(f"{source}: {models}")
    try:
        if options.containers:
            with step("container engine, base image, wheelhouse and the registry behind ECR") as say:
                prepare_containers(state, state_dir, say)
                save_state(state_dir, state)
        with step("embedded AWS (moto server) and the box's control plane"):
            start_embedded_aws(state, state_dir, options.time_scale, persist=True)
            save_state(state_dir, state)
        with step("runtime gateway (InvokeEndpoint)"):
            start_gateway(state, state_dir)
            save_state(state_dir, state)
        with step("AWS proxy (clients that build *.amazonaws.com URLs reach the box)"):
            start_aws_proxy(state, state_dir)
            save_state(state_dir, state)
        if not targets:  # the box alone: the user bootstraps and deploys with the CDK CLI
            save_state(state_dir, state)
            return state
        env = box_environment(state)
        cdk_log = state_dir / "logs" / "cdk.log"
        # The box's cloud assembly stays in its state directory: the repository's cdk.out is the user's own `npx cdk`
        # output, and two boxes (two state directories) never write one assembly.
        context = [*cdk_context(state, targets), "--output", str(state_dir / "cdk.out")]
        with step("cdk bootstrap"):
            run_cdk(["bootstrap", f"aws://{ACCOUNT}/{state.region}", *context], env, cdk_log)
        stacks = [f"sagebox-{t}" for t in targets]
        with step(f"cdk deploy {' '.join(stacks)}") as say:
            state.stacks = ["sagebox-artifacts", *stacks]
            save_state(state_dir, state)
            deploy = ["deploy", *stacks, "--require-approval", "never", "--concurrency", str(len(stacks))]
            run_cdk([*deploy, "--progress", "events", *context], env, cdk_log)
            say("every endpoint InService")
    except BaseException:
        save_state(state_dir, state)
        raise
    save_state(state_dir, state)
    return state
