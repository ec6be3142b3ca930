"""The instances behind an endpoint: serving processes, or containers of the endpoint's image (I/O only).

What SageMaker does per instance, after AWS's "Custom Inference Code with Hosting Services" and "How Containers
Serve Requests": the model data (`ModelDataUrl`, a model.tar.gz in S3) is untarred into /opt/ml/model, the image
runs as `docker run IMAGE serve` with the model's `Environment`, and the instance counts as healthy once GET
/ping answers 200 within `ContainerStartupHealthCheckTimeoutInSeconds`. Shutdown is SIGTERM, then SIGKILL 30 s
later. In process mode the box runs this checkout's serving code (`python -m container serve`) in place of the
image, bound to 127.0.0.1; in container mode (sagebox.box.containers) it pulls the image by digest from the local
registry behind ECR.
A serverless variant's container gets its MemorySizeInMB as its memory limit (a serverless variant's memory is
all its container has); in process mode the limit is not enforced (a process has no cgroup of its own here).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from container.logs import load_failure
from sagebox.box.endpoint_logs import LineBuffer, new_instance_id
from sagebox.box.processes import popen
from sagebox.box.specs import VariantSpec
from sagebox.errors import SageboxError
from sagebox.local_server import inherited_listener

# SageMaker's shutdown: SIGTERM, SIGKILL this many seconds later.
STOP_GRACE_S = 30.0


class InstanceFailed(SageboxError):
    """An instance that exited or reported a failed model before /ping answered 200."""


class Instance(Protocol):
    url: str
    instance_id: str  # EC2-style (`i-...`): its log stream is <variant>/<instance_id> (sagebox.box.endpoint_logs)

    @property
    def label(self) -> str: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...

    def last_log_lines(self, count: int = 3) -> list[str]: ...

    def read_output(self) -> list[tuple[int, str]]:
        """What it wrote to stdout and stderr since the last call: (timestamp ms, line)."""
        ...

    def describe(self) -> dict[str, Any]: ...


class Launcher(Protocol):
    mode: str

    def launch(self, endpoint: str, variant: VariantSpec, index: int, model_dir: Path) -> Instance: ...

    def resolve_image(self, image: str) -> str:
        """The image as the endpoint will run it (a digest reference), for DescribeEndpoint's DeployedImages."""
        ...


# --- model data -------------------------------------------------------------------------------------------------


def fetch_model_data(s3: Any, url: str | None, dest: Path) -> Path:
    """Download `url` (s3://bucket/key of a model.tar.gz) and untar it into `dest` (replacing it), as SageMaker does."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if url is None:
        dest.mkdir()
        return dest
    if not url.startswith("s3://") or "/" not in url[5:]:
        raise SageboxError(f"ModelDataUrl {url!r} is not an s3://bucket/key URI")
    bucket, _, key = url[5:].partition("/")
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".download-") as tmp:
        tarball = Path(tmp) / "model.tar.gz"
        try:
            s3.download_file(bucket, key, str(tarball))
        except Exception as exc:  # botocore's ClientError and transport errors alike
            raise SageboxError(f"Could not download model data from {url}: {first_line(exc)}") from None
        staging = Path(tmp) / "model"
        try:
            with tarfile.open(tarball, "r:*") as tar:
                tar.extractall(staging, filter="data")  # no absolute paths, no .., no devices
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise SageboxError(f"Failed to extract model data archive from {url}: {first_line(exc)}") from None
        os.replace(staging, dest)
    return dest


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def ping(url: str, timeout_s: float = 2.0) -> tuple[int, dict[str, Any]]:
    """GET /ping: (status, JSON body or {})."""
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=timeout_s) as response:
            return int(response.status), _json(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), _json(exc.read())


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def answers_ping(instance: Instance) -> bool:
    """One health check of a serving instance: GET /ping answers 200 within 2 s."""
    try:
        return ping(instance.url)[0] == 200
    except (OSError, urllib.error.URLError):
        return False


# How often a starting instance is asked /ping. The INT8 demo model's server answers 200 ~0.6 s after it starts
# (docs/benchmarks.md, cold start): polling every 100 ms added 50 ms on average to every start the box waits on
# (serverless cold starts, scale-out, replacements). A /ping refused while loading costs the server a Starlette
# route, ~0.3 ms of CPU: at 40 a second about 1 % of a core.
PING_EVERY_S = 0.025


def wait_healthy(
    instance: Instance,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Poll /ping until 200 (seconds it took); InstanceFailed when the instance dies or refuses its model."""
    started = clock()
    while clock() - started < timeout_s:
        if not instance.alive():
            raise InstanceFailed(f"the container exited while starting: {' | '.join(instance.last_log_lines())}")
        try:
            status, body = ping(instance.url)
        except (OSError, urllib.error.URLError):
            status, body = 0, {}
        if status == 200:
            return clock() - started
        if body.get("status") == "failed":
            # The container tells clients only a short reason; its log line says why (container/service.py).
            reason = load_failure(instance.last_log_lines(40)) or str(body.get("message", "no reason given"))
            raise InstanceFailed(f"the container reported a failed model: {reason}")
        sleep(PING_EVERY_S)
    raise InstanceFailed(
        f"the container did not pass the ping health check within {timeout_s:.0f} s "
        f"(ContainerStartupHealthCheckTimeoutInSeconds): {' | '.join(instance.last_log_lines())}"
    )


def _tail(path: Path, count: int) -> list[str]:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ["no log"]
    return lines[-count:] or ["the container logged nothing"]


# --- serving processes ------------------------------------------------------------------------------------------


# A read of an instance's output takes at most this much (a runaway logger is read over several rounds).
OUTPUT_READ_BYTES = 4 * 1024 * 1024


@dataclass
class ProcessInstance:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path
    image: str
    instance_id: str = field(default_factory=new_instance_id)
    log_offset: int = 0  # where its output starts in log_path (a replacement appends to its predecessor's file)
    _lines: LineBuffer = field(default_factory=LineBuffer)

    @property
    def label(self) -> str:
        return f"pid {self.process.pid}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def last_log_lines(self, count: int = 3) -> list[str]:
        return _tail(self.log_path, count)

    def read_output(self) -> list[tuple[int, str]]:
        exited = not self.alive()
        try:
            with self.log_path.open("rb") as log:
                log.seek(self.log_offset)
                data = log.read(OUTPUT_READ_BYTES)
        except OSError:
            data = b""
        self.log_offset += len(data)
        lines = self._lines.feed(data)
        if exited and len(data) < OUTPUT_READ_BYTES:
            lines += self._lines.flush()
        now = int(time.time() * 1000)
        return [(now, line) for line in lines if line.strip()]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "process",
            "pid": self.process.pid,
            "url": self.url,
            "log": str(self.log_path),
            "instance_id": self.instance_id,
        }


def local_environment(model_env: Mapping[str, str], cpus: int) -> dict[str, str]:
    """The model's environment with workers and threads scaled to this machine instead of the instance type."""
    from container import env

    scaled = dict(model_env)
    scaled[env.MODEL_SERVER_WORKERS] = "1"
    scaled[env.INTRA_OP_THREADS] = str(cpus)
    return scaled


@dataclass
class ProcessLauncher:
    """This checkout's serving code stands in for the image: `python -m container serve` on 127.0.0.1."""

    logs: Path
    cpus: int
    mode: str = "processes"
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def launch(self, endpoint: str, variant: VariantSpec, index: int, model_dir: Path) -> Instance:
        from container import env

        log_path = self.logs / endpoint / f"{variant.name}-{index}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = log_path.stat().st_size if log_path.exists() else 0
        with inherited_listener() as (fd, listen):  # bound before the process starts: no port race
            environment = {
                **local_environment(variant.environment, self.cpus),
                env.MODEL_DIR: str(model_dir),
                **listen,
                **self.extra_env,
            }
            process = popen(["-m", "container", "serve"], log_path, environment, pass_fds=(fd,))
        port = listen[env.BIND_TO_PORT]
        return ProcessInstance(process, f"http://127.0.0.1:{port}", log_path, variant.image, log_offset=offset)

    def resolve_image(self, image: str) -> str:
        return image
