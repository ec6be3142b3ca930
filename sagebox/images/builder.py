"""Build the serving image through the Docker API (docker-py), from explicitly assembled contexts.

Two builds, each skipped when its inputs are unchanged: the `runtime` stages (base + venv from the
wheelhouse) tagged by a digest of their inputs, then the code stage on top of that image.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from sagebox.errors import SageboxError
from sagebox.images import context, dockerfile

if TYPE_CHECKING:
    import docker

REPOSITORY = "sagebox-serving"
RUNTIME_REPOSITORY = "localhost/sagebox-serving-runtime"
RUNTIME_STAGE = "runtime"
PLATFORM = "linux/amd64"
# The digest of an image's build inputs: an image already carrying it is not rebuilt.
INPUTS_LABEL = "org.sagebox.build-inputs-sha256"
EXPECTED_ENTRYPOINT = ["python", "-m", "container"]


@dataclass(frozen=True)
class BuildInputs:
    dockerfile: Path
    packages: Mapping[str, Path]  # name in the context -> source directory
    requirements: Path
    wheels: tuple[Path, ...]
    ca_bundle: Path
    base_image: str
    tag: str
    optional_packages: tuple[str, ...] = ()  # may be missing from a checkout: an empty directory then

    def build_args(self) -> dict[str, str]:
        return {"BASE_IMAGE": self.base_image}


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    id: str
    runtime_tag: str
    inputs_sha256: str
    seconds: float
    rebuilt: bool
    runtime_rebuilt: bool
    size_bytes: int


def image_tag(version: str) -> str:
    return f"{REPOSITORY}:{version}"


def serving_inputs(repo: Path, wheels: Iterable[Path], ca_bundle: Path, base_image: str, version: str) -> BuildInputs:
    """The inputs of the Sagebox serving image from a checkout at `repo`."""
    return BuildInputs(
        dockerfile=repo / "container" / "Dockerfile",
        packages={"container": repo / "container", "neuron_emu": repo / "neuron_emu"},
        requirements=repo / "container" / "requirements.txt",
        wheels=tuple(wheels),
        ca_bundle=ca_bundle,
        base_image=base_image,
        tag=image_tag(version),
        optional_packages=("neuron_emu",),
    )


def runtime_entries(inputs: BuildInputs) -> list[context.Entry]:
    """The context of the stages up to `runtime`: requirements, wheelhouse and CA bundle, no code."""
    text = dockerfile.head(inputs.dockerfile.read_text(), RUNTIME_STAGE)
    return context.assemble(
        [context.dockerfile_entry(text)],
        context.requirements_entries(inputs.requirements),
        context.wheel_entries(inputs.wheels),
        context.ca_entries(inputs.ca_bundle),
    )


def serving_entries(inputs: BuildInputs, runtime_image: str) -> list[context.Entry]:
    """The context of the last stage, built on `runtime_image`: the code only."""
    text = dockerfile.rebased_tail(inputs.dockerfile.read_text(), RUNTIME_STAGE, runtime_image)
    return context.assemble(
        [context.dockerfile_entry(text)], context.source_entries(inputs.packages, inputs.optional_packages)
    )


def full_entries(inputs: BuildInputs) -> list[context.Entry]:
    """The context for building the whole Dockerfile in one go (`docker build - < context.tar`)."""
    return context.assemble(
        [context.dockerfile_entry(inputs.dockerfile.read_text())],
        context.source_entries(inputs.packages, inputs.optional_packages),
        context.requirements_entries(inputs.requirements),
        context.wheel_entries(inputs.wheels),
        context.ca_entries(inputs.ca_bundle),
    )


def inputs_digest(context_sha256: str, build_args: Mapping[str, str]) -> str:
    text = "\n".join([context_sha256, *(f"{k}={v}" for k, v in sorted(build_args.items()))])
    return hashlib.sha256(text.encode()).hexdigest()


def build_error(chunks: Iterable[Mapping[str, Any]], log: Callable[[str], None]) -> str | None:
    """Feed the build's output lines to `log`; return the engine's error message, if the build failed."""
    for chunk in chunks:
        if "error" in chunk or "errorDetail" in chunk:
            detail = chunk.get("errorDetail") or {}
            message = str(chunk.get("error") or detail.get("message") or "unknown error")
            return " ".join(message.split())
        text = chunk.get("stream")
        if isinstance(text, str):
            for line in text.splitlines():
                if line.strip():
                    log(line.rstrip())
    return None


def check_image(attrs: Mapping[str, Any]) -> list[str]:
    """What is wrong with a built image's configuration against the SageMaker contract (empty when right)."""
    config = attrs.get("Config") or {}
    found = []
    if attrs.get("Architecture") != "amd64" or attrs.get("Os") != "linux":
        found.append(f"platform is {attrs.get('Os')}/{attrs.get('Architecture')}, not {PLATFORM}")
    user = str(config.get("User") or "")
    if user in ("", "0", "root") or user.startswith(("0:", "root:")):
        found.append("the image runs as root")
    if list(config.get("Entrypoint") or []) != EXPECTED_ENTRYPOINT:
        found.append(f"entrypoint is {config.get('Entrypoint')!r}, not exec-form {EXPECTED_ENTRYPOINT!r}")
    if "8080/tcp" not in (config.get("ExposedPorts") or {}):
        found.append("port 8080 is not exposed")
    return found


def find_image(client: docker.DockerClient, name: str) -> Any:
    import docker.errors

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def _build(
    client: docker.DockerClient,
    fileobj: BinaryIO,
    tag: str,
    labels: Mapping[str, str],
    build_log: Path,
    log: Callable[[str], None],
    target: str | None = None,
    build_args: Mapping[str, str] | None = None,
) -> Any:
    import docker.errors

    with build_log.open("a") as log_file:

        def record(line: str) -> None:
            log_file.write(line + "\n")
            log(line)

        record(f"### building {tag}" + (f" (target {target})" if target else ""))
        try:
            error = build_error(_stream(client, fileobj, tag, labels, target, build_args), record)
        except docker.errors.APIError as exc:
            error = " ".join(str(exc.explanation or exc).split())
    if error:
        raise SageboxError(f"building {tag} failed: {error} (full log: {build_log})")
    image = find_image(client, tag)
    if image is None:
        raise SageboxError(f"the build finished but {tag} is not in the engine (full log: {build_log})")
    return image


def _stream(
    client: docker.DockerClient,
    fileobj: BinaryIO,
    tag: str,
    labels: Mapping[str, str],
    target: str | None,
    build_args: Mapping[str, str] | None,
) -> Iterator[dict[str, Any]]:
    chunks: Iterator[dict[str, Any]] = client.api.build(
        fileobj=fileobj,
        custom_context=True,
        tag=tag,
        target=target,
        platform=PLATFORM,
        buildargs=dict(build_args or {}),
        labels=dict(labels),
        rm=True,
        forcerm=True,
        pull=False,  # never a registry: the base image is made locally
        decode=True,
    )
    return chunks


def _labelled(image: Any, digest: str) -> bool:
    return image is not None and (image.labels or {}).get(INPUTS_LABEL) == digest


def ensure_runtime_image(
    client: docker.DockerClient,
    inputs: BuildInputs,
    work_dir: Path,
    log: Callable[[str], None],
) -> tuple[str, bool]:
    """The `runtime` stages as an image named by their inputs' digest; built only when missing."""
    entries = runtime_entries(inputs)
    digest = inputs_digest(context.write_tar(entries, None), inputs.build_args())
    tag = f"{RUNTIME_REPOSITORY}:{digest[:16]}"
    if _labelled(find_image(client, tag), digest):
        return tag, False
    tar_path = work_dir / "runtime-context.tar"
    tmp = tar_path.with_name(f".{tar_path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            context.write_tar(entries, fh)
        with tmp.open("rb") as fh:
            _build(client, fh, tag, {INPUTS_LABEL: digest}, work_dir / "build.log", log,
                   target=RUNTIME_STAGE, build_args=inputs.build_args())  # fmt: skip
    finally:
        tmp.unlink(missing_ok=True)
    return tag, True


def prune_superseded(client: docker.DockerClient, runtime_tag: str) -> int:
    """Remove runtime images other than `runtime_tag`, then untagged images: bytes reclaimed (by the engine's count).

    Each runtime image holds its own 1 GB venv layer; images still used by a container stay.
    """
    import docker.errors

    for image in client.images.list(name=RUNTIME_REPOSITORY):
        for tag in image.tags:
            if tag != runtime_tag and tag.startswith(f"{RUNTIME_REPOSITORY}:"):
                with contextlib.suppress(docker.errors.APIError):  # in use by a container: kept
                    client.images.remove(tag)
    result = client.images.prune(filters={"dangling": True})
    return int((result or {}).get("SpaceReclaimed") or 0)


def build_image(
    client: docker.DockerClient,
    inputs: BuildInputs,
    work_dir: Path,
    log: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.monotonic,
) -> BuiltImage:
    """Build (or reuse, when its inputs are unchanged) the serving image tagged `inputs.tag`."""
    started = clock()
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "build.log").write_text("")
    runtime_tag, runtime_rebuilt = ensure_runtime_image(client, inputs, work_dir, log)
    if runtime_rebuilt:
        log(f"pruned superseded images: {prune_superseded(client, runtime_tag) / 1e6:.0f} MB reclaimed")
    runtime_id = str(find_image(client, runtime_tag).id)
    data, context_sha256 = context.tar_bytes(serving_entries(inputs, runtime_tag))
    digest = inputs_digest(context_sha256, {"runtime": runtime_id})
    image = find_image(client, inputs.tag)
    rebuilt = not _labelled(image, digest)
    if rebuilt:
        image = _build(client, io.BytesIO(data), inputs.tag, {INPUTS_LABEL: digest}, work_dir / "build.log", log)
    found = check_image(image.attrs)
    if found:
        raise SageboxError(f"{inputs.tag} breaks the container contract: {'; '.join(found)}")
    return BuiltImage(
        tag=inputs.tag,
        id=str(image.id),
        runtime_tag=runtime_tag,
        inputs_sha256=digest,
        seconds=clock() - started,
        rebuilt=rebuilt,
        runtime_rebuilt=runtime_rebuilt,
        size_bytes=int(image.attrs.get("Size") or 0),
    )


def write_full_context(inputs: BuildInputs, out: Path) -> str:
    """Write the one-go build context to `out` (via a temp file); return its sha256."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            digest = context.write_tar(full_entries(inputs), fh)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return digest
