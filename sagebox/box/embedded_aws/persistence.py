"""The embedded AWS's state on disk, so that a box killed outright (kill -9 of every process) comes back with it.

AWS keeps what its APIs accepted: an object PutObject answered is in S3, an endpoint CreateEndpoint answered exists,
a message an SQS queue took stays until deleted. moto keeps all of it in the server's memory, so the box snapshots
moto's backends (LocalStack's approach for its moto-backed services): one pickle of every backend in use
(`state.pickle`: their objects keep referring to each other), written atomically (temporary file, fsync, rename)
before the answer of every request that may change something leaves the server, and once a second for what the
control plane changes in-process (endpoint statuses). S3 object bodies are kept beside it, one file per object
version, written once (`blobs/`): a snapshot pickles their metadata only. `sagebox up` restores the snapshot when
the previous box died; `sagebox down` deletes it, as it always dropped the box's data.

`restore` also puts every endpoint back on its feet (`recover_endpoints`): nothing runs behind a restored endpoint,
so each one that was serving (InService, or Updating/RollingBack: an update the restart cut short) is deployed again
from the config DescribeEndpoint names, the config it served; an update not yet switched is dropped, as SageMaker
leaves the old config serving when an update fails, and FailureReason says so until the endpoint serves again.
"""

from __future__ import annotations

import contextlib
import copyreg
import io
import logging
import os
import pickle
import tempfile
import threading
import uuid
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("sagebox.aws.persistence")

SNAPSHOT_DIR = "aws-state"
SNAPSHOT_FILE = "state.pickle"
BLOBS = "blobs"
# The moto services the box uses (sagebox.box.embedded_aws.server patches and serves them).
SERVICES = (
    "s3",
    "sns",
    "sqs",
    "sagemaker",
    "cloudformation",
    "iam",
    "ecr",
    "ssm",
    "kms",
    "cloudwatch",
    "logs",
    "applicationautoscaling",
    "sts",
)
# X-Amz-Target actions that only read (JSON-protocol services): no snapshot after them.
READ_ONLY_PREFIXES = ("Describe", "List", "Get", "Search")
RECOVERED = "The box restarted while this endpoint was {what}; it serves endpoint config {config} again."

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _new_lock(kind: type) -> Any:
    return threading.RLock() if kind is _LOCK_TYPES[1] else threading.Lock()


def _pickle_locks() -> None:
    """moto's SQS queues and S3 keys hold locks: a restored one gets a fresh lock (registered process-wide, by the
    embedded AWS process only: importing this module for its names changes nothing)."""
    for kind in _LOCK_TYPES:
        copyreg.pickle(kind, lambda lock, _k=kind: (_new_lock, (_k,)))  # type: ignore[misc]


def snapshot_dir(state_dir: Path) -> Path:
    return state_dir / SNAPSHOT_DIR


def _fsync_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _load_key(cls: Any, blob: str, state: dict[str, Any]) -> Any:
    """A restored S3 key: its metadata from the snapshot, its body from its blob file (see Snapshots.restore)."""
    key = cls.__new__(cls)
    directory = _RESTORING.directory
    state = dict(state, value=(directory / blob).read_bytes() if directory else b"")
    key.__setstate__(state)
    _RESTORING.blobs[key] = blob
    return key


def _nested_dict() -> defaultdict[str, dict[str, str]]:
    return defaultdict(dict)


def _load_nested_defaultdict(items: dict[Any, Any]) -> defaultdict[Any, Any]:
    """A restored `defaultdict(lambda: defaultdict(dict))` (moto's SSM tags), its factory a module-level one."""
    restored: defaultdict[Any, Any] = defaultdict(_nested_dict)
    restored.update(items)
    return restored


def _load_defaultdict_subclass(
    cls: type[defaultdict[Any, Any]], factory: Any, items: dict[Any, Any], attributes: dict[str, Any]
) -> defaultdict[Any, Any]:
    """A restored defaultdict subclass whose __init__ takes other arguments (moto's SSM ParameterDict)."""
    restored = cls.__new__(cls)
    defaultdict.__init__(restored, factory)
    restored.update(items)
    restored.__dict__.update(attributes)
    return restored


def _load_private_key(pem: bytes) -> Any:
    """A restored private key (moto's KMS keys hold cryptography objects, which pickle refuses)."""
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key(pem, password=None)


def _private_key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem


class _Restoring(threading.local):
    directory: Path | None = None
    blobs: Any = None


_RESTORING = _Restoring()


class Snapshots:
    """Writes and restores the snapshot of moto's backends under `directory` (the box's `aws-state`)."""

    def __init__(self, directory: Path, services: Iterable[str] = SERVICES) -> None:
        _pickle_locks()
        self.directory = directory
        self._services = tuple(services)
        self._lock = threading.Lock()
        self._last = b""
        # S3 keys already on disk: key object -> blob file name (a key's body never changes once written).
        self._blobs: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.writes = 0

    def _backends(self) -> dict[str, dict[str, dict[str, Any]]]:
        from moto.backends import get_backend

        found: dict[str, dict[str, dict[str, Any]]] = {}
        for name in self._services:
            accounts = {acc: dict(regions) for acc, regions in get_backend(name).items() if len(regions)}  # type: ignore[call-overload]
            if accounts:
                found[name] = accounts
        return found

    def _pickle(self, backends: Any) -> tuple[bytes, dict[Any, str]]:
        from moto.s3.models import FakeKey

        new_blobs: dict[Any, str] = {}
        blobs = self._blobs
        buffer = io.BytesIO()

        class Pickler(pickle.Pickler):
            def reducer_override(self, obj: Any) -> Any:
                if isinstance(obj, defaultdict) and getattr(obj.default_factory, "__name__", "") == "<lambda>":
                    # moto's SSM backend keeps its resource tags in `defaultdict(lambda: defaultdict(dict))`, which
                    # pickle refuses (a local lambda): every snapshot after the first SSM parameter (cdk bootstrap
                    # writes one) failed, and a restart came back with state from before it.
                    return (_load_nested_defaultdict, (dict(obj),))
                if type(obj).__module__.startswith("cryptography.") and hasattr(obj, "private_bytes"):
                    # moto's KMS keys (the CDK app's bucket key) hold a cryptography private key: kept as PEM.
                    return (_load_private_key, (_private_key_pem(obj),))
                if isinstance(obj, defaultdict) and type(obj) is not defaultdict:
                    # pickle rebuilds a defaultdict subclass as cls(default_factory): ParameterDict's __init__ takes
                    # (account_id, region_name).
                    return (_load_defaultdict_subclass, (type(obj), obj.default_factory, dict(obj), vars(obj)))
                if not isinstance(obj, FakeKey):
                    return NotImplemented
                blob = blobs.get(obj) or new_blobs.get(obj)
                if blob is None:
                    blob = new_blobs[obj] = uuid.uuid4().hex
                state = {k: v for k, v in obj.__dict__.items() if k not in ("_value_buffer", "lock")}
                return (_load_key, (type(obj), blob, state))

        Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(backends)
        return buffer.getvalue(), new_blobs

    def save(self) -> bool:
        """Write the snapshot when anything changed since the last one; whether it wrote."""
        with self._lock:
            for attempt in range(5):
                try:
                    data, new_blobs = self._pickle(self._backends())
                    break
                except RuntimeError:  # a request thread changed a backend while it was pickled: again
                    if attempt == 4:
                        raise
            if data == self._last:
                return False
            blobs = self.directory / BLOBS
            blobs.mkdir(parents=True, exist_ok=True)
            for key, name in new_blobs.items():
                _fsync_write(blobs / name, bytes(key.value))
                self._blobs[key] = name
            _fsync_write(self.directory / SNAPSHOT_FILE, data)
            self._last = data
            self.writes += 1
            kept = set(self._blobs.values())
            for path in blobs.iterdir():  # bodies of objects no snapshot refers to any more
                if path.name not in kept and not path.name.startswith("."):
                    path.unlink(missing_ok=True)
            return True

    def save_quietly(self) -> None:
        """save(), a failure logged (the control plane's changes are saved again on the next pass)."""
        try:
            self.save()
        except Exception:
            log.exception("could not write the embedded AWS's snapshot")

    def restore(self) -> list[str]:
        """Put the snapshot's backends in place of moto's (call before the server answers); the services restored."""
        from moto.backends import get_backend

        path = self.directory / SNAPSHOT_FILE
        if not path.is_file():
            return []
        _RESTORING.directory, _RESTORING.blobs = self.directory / BLOBS, self._blobs
        try:
            saved = pickle.loads(path.read_bytes())
        finally:
            _RESTORING.directory, _RESTORING.blobs = None, None
        for name, accounts in saved.items():
            live = get_backend(name)
            for account, regions in accounts.items():
                for region, backend in regions.items():
                    dict.__setitem__(live[account], region, backend)
        self._last = path.read_bytes()
        return sorted(saved)


def recover_endpoints(backend: Any) -> list[str]:
    """Every endpoint that was serving, made to be deployed again from the config it serves (see the docstring);
    the endpoints recovered."""
    from sagebox.box.specs import CREATING, IN_SERVICE, ROLLING_BACK, UPDATING

    recovered = []
    for name, endpoint in list(backend.endpoints.items()):
        status = endpoint.endpoint_status
        if status not in (IN_SERVICE, UPDATING, ROLLING_BACK, "SystemUpdating"):
            continue
        pending = getattr(endpoint, "pending_deployment_summary", None)
        endpoint.pending_deployment_summary = None
        if status != IN_SERVICE:
            what = "updating" if pending else "changing"
            endpoint.failure_reason = RECOVERED.format(what=what, config=endpoint.endpoint_config_name)
        endpoint.endpoint_status = CREATING
        recovered.append(name)
    return recovered


def wrap_app(app: Callable[..., Any], after_change: Callable[[], Any]) -> Callable[..., Any]:
    """A WSGI app that runs `after_change()` once a request that may change state is answered, before the answer
    leaves: what a client was told was done is on disk."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        body = app(environ, start_response)
        if not _may_change(environ):
            return body
        try:
            chunks = list(body)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        after_change()
        return chunks

    return wrapped


def _may_change(environ: dict[str, Any]) -> bool:
    if environ.get("REQUEST_METHOD", "GET") in ("GET", "HEAD", "OPTIONS"):
        return False
    if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
        return False
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    action = target.rpartition(".")[2]
    return not (action and action.startswith(READ_ONLY_PREFIXES))


def persistent_server(snapshots: Snapshots, ip_address: str, port: int) -> Any:
    """moto's ThreadedMotoServer whose state-changing requests are snapshotted before they are answered."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class PersistentMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = wrap_app(DomainDispatcherApplication(create_backend_app), snapshots.save_quietly)
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return PersistentMotoServer(ip_address=ip_address, port=port, verbose=False)


def run_periodically(snapshots: Snapshots, stop: threading.Event, every_s: float = 1.0) -> threading.Thread:
    """Snapshot what changed in-process (the control plane's endpoint statuses) every `every_s`."""

    def loop() -> None:
        while not stop.wait(every_s):
            snapshots.save_quietly()

    thread = threading.Thread(target=loop, name="aws-snapshots", daemon=True)
    thread.start()
    return thread
