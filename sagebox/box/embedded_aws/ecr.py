"""moto's ECR, backed by a real local OCI registry (every patch listed in infra/README.md).

cdk-assets pushes an image asset to the `repositoryUri` that `DescribeRepositories` gives, after `docker login`
to `GetAuthorizationToken`'s `proxyEndpoint` (FACTS.md). moto answered both with `<account>.dkr.ecr.<region>.
amazonaws.com`, where a push goes nowhere. Here both name the local registry (`127.0.0.1:<port>`), and the images
ECR lists (`ListImages`, `DescribeImages`, `BatchGetImage`) are read from that registry when asked, so ECR shows
exactly what was pushed. Templates still name images `<account>.dkr.ecr.<region>.<suffix>/<repo>:<tag>`, as on
AWS; the control plane maps that name to the registry when it pulls (`registry_reference`).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from moto.core.responses import ActionResult
from moto.ecr.models import ECRBackend, Repository
from moto.ecr.responses import ECRResponse

from sagebox.box.registry import RegistryClient

log = logging.getLogger("sagebox.aws")

_lock = threading.Lock()
_applied = False
# repository URI host of an ECR image name: <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]
ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<rest>.+)$"
)


def registry_reference(image_uri: str, registry_host: str) -> str | None:
    """The registry's name for an ECR image URI (`<host:port>/<repo>:<tag>` or `@<digest>`); None if not ECR's."""
    match = ECR_IMAGE.match(image_uri)
    return f"{registry_host}/{match['rest']}" if match else None


def apply(client: RegistryClient) -> None:
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    host = client.host_port
    original_init = Repository.__init__

    def __init__(self: Repository, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.uri = f"{host}/{self.name}"

    Repository.__init__ = __init__  # type: ignore[method-assign]

    original_token = ECRResponse.get_authorization_token

    def get_authorization_token(self: ECRResponse) -> ActionResult:
        result = original_token(self)
        for item in result.result.get("authorizationData", []):  # type: ignore[attr-defined]
            item["proxyEndpoint"] = f"https://{host}"
        return result

    ECRResponse.get_authorization_token = get_authorization_token  # type: ignore[method-assign]

    for name in ("list_images", "describe_images", "batch_get_image"):
        _read_through(name, client)


def _read_through(method: str, client: RegistryClient) -> None:
    original = getattr(ECRBackend, method)

    def wrapper(self: ECRBackend, repository_name: str, *args: Any, **kwargs: Any) -> Any:
        sync_repository(self, repository_name, client)
        return original(self, repository_name, *args, **kwargs)

    setattr(ECRBackend, method, wrapper)


def sync_repository(backend: ECRBackend, repository_name: str, client: RegistryClient) -> int:
    """Copy the registry's tags of a repository into moto's ECR; the number of tags added."""
    repository = backend.repositories.get(repository_name)
    if repository is None:
        return 0
    known = {tag for image in repository.images for tag in image.image_tags}
    added = 0
    try:
        tags = client.tags(repository_name)
    except Exception as exc:  # the registry is down: ECR answers from what it knew
        log.warning("registry unreachable while listing %s: %s", repository_name, exc)
        return 0
    for tag in tags:
        if tag in known:
            continue
        found = client.manifest(repository_name, tag)
        if found is None:
            continue
        digest, media_type, body = found
        try:
            backend.put_image(repository_name, body.decode(), tag, media_type, digest)
            added += 1
        except Exception as exc:  # an immutable tag moved in the registry: ECR keeps the first
            log.warning("ECR %s:%s not updated from the registry: %s", repository_name, tag, exc)
    return added
