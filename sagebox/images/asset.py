"""The serving image exactly as cdk-assets builds it: read from a cloud assembly's `*.assets.json`, built through
the Docker API (Docker Engine, or podman's compatible socket).

cdk-assets builds an image asset as `docker build --file <dockerFile> --platform <platform> [--build-arg ...]
[--target ...] <asset directory>` in the directory `cdk synth` staged (`cdk.out/asset.<hash>`, .dockerignore
applied) (FACTS.md). `build_asset` does the same through the API, so what the box and the tests run is what
`cdk deploy` pushes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagebox.errors import SageboxError

if TYPE_CHECKING:
    import docker

    from infra.settings import AppSettings

PLATFORM = "linux/amd64"
EXPECTED_ENTRYPOINT = ["python", "-m", "container"]


@dataclass(frozen=True)
class ImageAsset:
    asset_hash: str
    directory: Path  # the staged build context
    dockerfile: str
    platform: str | None
    build_args: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None


def read_image_assets(cdk_out: Path) -> list[ImageAsset]:
    """Every image asset that the assembly's `*.assets.json` describe (one per asset hash)."""
    found: dict[str, ImageAsset] = {}
    for manifest in sorted(cdk_out.glob("*.assets.json")):
        for asset_hash, entry in json.loads(manifest.read_text()).get("dockerImages", {}).items():
            source = entry["source"]
            if "directory" not in source:
                continue  # an executable-built asset: not ours
            found[asset_hash] = ImageAsset(
                asset_hash=asset_hash,
                directory=(cdk_out / source["directory"]).resolve(),
                dockerfile=source.get("dockerFile", "Dockerfile"),
                platform=source.get("platform"),
                build_args=dict(source.get("dockerBuildArgs") or {}),
                target=source.get("dockerBuildTarget"),
            )
    return list(found.values())


def synth_serving_asset(settings: AppSettings, outdir: Path) -> ImageAsset:
    """The serving image asset alone, synthesized by the same construct the endpoint stacks use."""
    import aws_cdk as cdk

    from infra.plan import resolve_image
    from infra.stacks.endpoint import serving_image_asset

    image = resolve_image("image", "build", settings)
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "sagebox-image")
    serving_image_asset(stack, "Image", image)  # type: ignore[arg-type]
    app.synth()
    [asset] = read_image_assets(outdir)
    return asset


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


def build_asset(
    client: docker.DockerClient, asset: ImageAsset, tag: str, log: Callable[[str], None] = lambda line: None
) -> Any:
    """`docker build` of the asset as cdk-assets runs it; the built image (docker-py Image)."""
    import docker.errors

    try:
        chunks = client.api.build(
            path=str(asset.directory),
            dockerfile=asset.dockerfile,
            platform=asset.platform,
            buildargs=dict(asset.build_args),
            target=asset.target,
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
        )
        error = build_error(chunks, log)
    except docker.errors.APIError as exc:
        error = " ".join(str(exc.explanation or exc).split())
    if error:
        raise SageboxError(f"building {tag} failed: {error}")
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        raise SageboxError(f"the build finished but {tag} is not in the engine") from None


def contract_findings(attrs: Mapping[str, Any]) -> list[str]:
    """What breaks SageMaker's container contract in a built image's configuration (empty when it keeps it)."""
    config = attrs.get("Config") or {}
    found = []
    if attrs.get("Architecture") != "amd64" or attrs.get("Os") != "linux":
        found.append(f"platform is {attrs.get('Os')}/{attrs.get('Architecture')}, not {PLATFORM}")
    user = str(config.get("User") or "")
    if user not in ("", "0", "root", "0:0", "root:root"):
        found.append(f"the image runs as {user!r}: SageMaker expects containers to run as root")
    if list(config.get("Entrypoint") or []) != EXPECTED_ENTRYPOINT:
        found.append(f"entrypoint is {config.get('Entrypoint')!r}, not exec-form {EXPECTED_ENTRYPOINT!r}")
    if "8080/tcp" not in (config.get("ExposedPorts") or {}):
        found.append("port 8080 is not exposed")
    return found


def build_serving_image(
    client: docker.DockerClient, settings: AppSettings, tag: str, log: Callable[[str], None] = lambda line: None
) -> Any:
    """Synthesize the serving image asset from `settings` (context, base image, wheelhouse) and build it."""
    with tempfile.TemporaryDirectory(prefix="sagebox-image-") as outdir:
        asset = synth_serving_asset(settings, Path(outdir))
        image = build_asset(client, asset, tag, log)
    found = contract_findings(image.attrs)
    if found:
        raise SageboxError(f"{tag} breaks the container contract: {'; '.join(found)}")
    return image
