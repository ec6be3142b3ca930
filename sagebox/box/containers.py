"""The instances of container mode: containers of the endpoint's own image, pulled by digest from the local
registry behind the embedded ECR, run as SageMaker runs them (`docker run IMAGE serve`, the model under
/opt/ml/model, port 8080 published on 127.0.0.1), their output followed through Docker's logs API.
A serverless variant's container gets its MemorySizeInMB as its memory limit (a serverless variant's memory is all
its container has).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box.endpoint_logs import BOX_PREFIX, LineBuffer, docker_timestamp_ms, new_instance_id
from sagebox.box.fleet import STOP_GRACE_S, Instance, first_line
from sagebox.box.specs import VariantSpec
from sagebox.errors import SageboxError
from sagebox.images.run import CONTAINER_PORT, MODEL_MOUNT
from sagebox.local_server import free_port


@dataclass
class ContainerInstance:
    container: Any  # docker.models.containers.Container
    url: str
    image: str
    instance_id: str = field(default_factory=new_instance_id)
    _output: list[tuple[int, str]] = field(default_factory=list)
    _output_lock: threading.Lock = field(default_factory=threading.Lock)
    _follower: threading.Thread | None = None

    def follow_output(self) -> None:
        """Read the container's output (Docker's logs API, timestamped, followed) on a thread of its own until it
        stops; `read_output` hands over what was read."""

        def follow() -> None:
            lines = LineBuffer()
            try:
                for chunk in self.container.logs(stream=True, follow=True, timestamps=True):
                    self._take(lines.feed(chunk))
            except Exception as exc:  # the engine went away: what was read is kept
                self._take([f"{BOX_PREFIX}the container's output could not be read further: {first_line(exc)}"])
            self._take(lines.flush())

        self._follower = threading.Thread(target=follow, name=f"output-{str(self.container.id)[:12]}", daemon=True)
        self._follower.start()

    def _take(self, lines: list[str]) -> None:
        now = int(time.time() * 1000)
        stamped = [docker_timestamp_ms(line, now) for line in lines]
        with self._output_lock:
            self._output += [(ts or now, message) for ts, message in stamped if message.strip()]

    def read_output(self) -> list[tuple[int, str]]:
        with self._output_lock:
            taken, self._output = self._output, []
        return taken

    @property
    def label(self) -> str:
        return f"container {str(self.container.id)[:12]}"

    def alive(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # removed behind our back
            return False
        return str(self.container.status) in ("created", "running")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.container.stop(timeout=int(STOP_GRACE_S))
        if self._follower is not None:  # its last lines are read before the container goes
            self._follower.join(timeout=5)
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def last_log_lines(self, count: int = 3) -> list[str]:
        try:
            raw = self.container.logs(tail=count * 4)
        except Exception as exc:
            return [f"no logs: {first_line(exc)}"]
        lines = [line for line in raw.decode(errors="replace").splitlines() if line.strip()]
        return lines[-count:] or ["the container logged nothing"]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "container",
            "id": str(self.container.id),
            "url": self.url,
            "image": self.image,
            "instance_id": self.instance_id,
        }


def container_limits(variant: VariantSpec) -> dict[str, Any]:
    """docker-py `containers.run` resource arguments: a serverless variant's memory (MemorySizeInMB) as a hard
    limit, swap included (memswap_limit equal to mem_limit: no swap beyond it), as the compute SageMaker gives it."""
    if variant.serverless is None:
        return {}
    limit = f"{variant.serverless.memory_mb}m"
    return {"mem_limit": limit, "memswap_limit": limit}


@dataclass
class ContainerLauncher:
    """The endpoint's own image, pulled by digest from the registry behind the embedded ECR."""

    client: Any  # docker.DockerClient
    registry_host: str | None
    resolve_digest: Callable[[str], str | None]  # registry reference (repo:tag) -> sha256 digest
    mode: str = "containers"

    def _registry_name(self, image: str) -> str:
        from sagebox.box.embedded_aws.ecr import registry_reference

        if self.registry_host:
            mapped = registry_reference(image, self.registry_host)
            if mapped:
                return mapped
        return image

    def resolve_image(self, image: str) -> str:
        name = self._registry_name(image)
        if "@sha256:" in name:
            return name
        digest = self.resolve_digest(name)
        if digest is None:
            raise SageboxError(
                f"image {image} is not in the registry (was it pushed? `cdk deploy` pushes image assets)"
            )
        repository = name.rsplit(":", 1)[0] if ":" in name.split("/")[-1] else name
        return f"{repository}@{digest}"

    def launch(self, endpoint: str, variant: VariantSpec, index: int, model_dir: Path) -> Instance:
        import docker.errors

        reference = self.resolve_image(variant.image)
        try:
            self.client.images.pull(reference)
        except docker.errors.APIError as exc:
            raise SageboxError(f"cannot pull {reference}: {' '.join(str(exc.explanation or exc).split())}") from None
        port = free_port()
        try:
            container = self.client.containers.run(
                reference,
                command=["serve"],
                detach=True,
                environment=dict(variant.environment),
                ports={f"{CONTAINER_PORT}/tcp": ("127.0.0.1", port)},
                volumes={str(model_dir.resolve()): {"bind": MODEL_MOUNT, "mode": "ro"}},
                labels={"org.sagebox.role": "serving", "org.sagebox.endpoint": endpoint},
                **container_limits(variant),
            )
        except docker.errors.APIError as exc:
            raise SageboxError(f"cannot start {reference}: {' '.join(str(exc.explanation or exc).split())}") from None
        instance = ContainerInstance(container, f"http://127.0.0.1:{port}", reference)
        instance.follow_output()
        return instance
