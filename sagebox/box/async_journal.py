"""The runtime gateway's journal of asynchronous requests: what it accepted and how far each one got, on disk.

SageMaker keeps an accepted InvokeEndpointAsync request until it is answered
(https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference.html: requests are queued, inputs stay in S3), so
a box that dies must not lose one. Before the gateway answers 202 it appends the request to
`<state dir>/async-journal/journal.jsonl` and fsyncs; then, as the worker goes, the outcome written to S3
(`written`), the exact notification it is about to publish (`notifying`), and `done`. A gateway that starts finds
the requests accepted and not done and finishes each from where it stopped:

- nothing written: if the output or failure object is already in S3 (the gateway died between the write and its
  record) it is not redone, else the request is invoked as new;
- written: only the notification is left;
- notifying: the recorded message is published again, word for word. The embedded SNS drops a second delivery of an
  identical SageMaker notification to the same topic (sagebox.box.embedded_aws.sns_dedupe), so none arrives twice.

Each line is one JSON record; a torn last line (the process killed mid-write) is skipped. At start the journal is
rewritten (atomically) with the unfinished requests only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

JOURNAL_DIR = "async-journal"
JOURNAL_FILE = "journal.jsonl"


@dataclass(frozen=True)
class Written:
    ok: bool
    content_type: str
    reason: str = ""


@dataclass(frozen=True)
class Notifying:
    topic: str
    message: str


@dataclass(frozen=True)
class Unfinished:
    """An accepted request the previous gateway did not finish, and how far it got."""

    key: str
    job: dict[str, Any]  # sagebox.box.async_inference.Job's fields
    written: Written | None = None
    notifying: Notifying | None = None


def new_key() -> str:
    return uuid.uuid4().hex


class AsyncJournal:
    def __init__(self, state_dir: Path) -> None:
        self.directory = state_dir / JOURNAL_DIR
        self.path = self.directory / JOURNAL_FILE
        self._lock = threading.Lock()
        self._fd: int | None = None

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line)
            os.fsync(self._fd)

    def accepted(self, key: str, job: Any) -> None:
        self._append({"op": "accepted", "key": key, "job": asdict(job) | {"config": dict(job.config)}})

    def written(self, key: str, written: Written) -> None:
        self._append({"op": "written", "key": key, **asdict(written)})

    def notifying(self, key: str, notifying: Notifying) -> None:
        self._append({"op": "notifying", "key": key, **asdict(notifying)})

    def done(self, key: str) -> None:
        self._append({"op": "done", "key": key})

    def unfinished(self) -> list[Unfinished]:
        """The requests accepted and not done, in the order they were accepted."""
        found: dict[str, Unfinished] = {}
        if not self.path.is_file():
            return []
        for raw in self.path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
                key, op = str(record["key"]), record["op"]
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: the process was killed while writing it
            if op == "accepted":
                found[key] = Unfinished(key, dict(record["job"]))
            elif op == "done":
                found.pop(key, None)
            elif key in found and op == "written":
                entry = found[key]
                written = Written(bool(record["ok"]), str(record["content_type"]), str(record.get("reason", "")))
                found[key] = Unfinished(key, entry.job, written, entry.notifying)
            elif key in found and op == "notifying":
                entry = found[key]
                found[key] = Unfinished(key, entry.job, entry.written, Notifying(record["topic"], record["message"]))
        return list(found.values())

    def compact(self) -> list[Unfinished]:
        """Rewrite the journal with the unfinished requests only (atomically); those requests."""
        pending = self.unfinished()
        if not self.path.is_file():
            return pending
        lines = []
        for entry in pending:
            lines.append({"op": "accepted", "key": entry.key, "job": entry.job})
            if entry.written is not None:
                lines.append({"op": "written", "key": entry.key, **asdict(entry.written)})
            if entry.notifying is not None:
                lines.append({"op": "notifying", "key": entry.key, **asdict(entry.notifying)})
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{JOURNAL_FILE}.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(b"".join((json.dumps(r, separators=(",", ":")) + "\n").encode() for r in lines))
                fh.flush()
                os.fsync(fh.fileno())
            with self._lock:
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
                os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return pending

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
