"""Asynchronous inference in the box: InvokeEndpointAsync's queue, its worker, and what it writes and publishes.

After AWS's "Asynchronous inference" (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference.html) and
the InvokeEndpointAsync API: a request names its input in S3 (`InputLocation`) and is queued; the answer gets an
inference ID (the caller's, else a generated one) and the caller learns at once where it will be:
`<S3OutputPath>/<inference id>.out`, or on failure `<S3FailurePath or S3OutputPath>/<inference id>-error.out`.
A worker reads the input, invokes an instance, writes the answer (or the error) there and, when the endpoint's
NotificationConfig names topics, publishes the outcome to SNS ("Check prediction results",
https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-check-predictions.html: a JSON message with
invocationStatus, requestParameters, responseParameters and inferenceId). An instance takes at most
MaxConcurrentInvocationsPerInstance requests at once (the box's default when the config sets none:
DEFAULT_PER_INSTANCE). The queue's depth is published as ApproximateBacklogSize and
ApproximateBacklogSizePerInstance (AWS/SageMaker, dimension EndpointName: "Monitoring asynchronous endpoints",
https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html), which autoscaling can track.

The queue lives in the runtime gateway's memory, and every accepted request in its journal on disk
(sagebox.box.async_journal), written before the 202: a gateway that starts finishes what the previous one accepted,
none twice. The S3 and SNS calls go to the box's embedded AWS through `AsyncStore` (injectable for tests).
Not done: RequestTTLSeconds and InvocationTimeoutSeconds (a request waits in the queue as long as it takes; the
container call times out after the gateway's 60 s) and IncludeInferenceResponseIn (notifications never carry the
answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import logging
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sagebox.box.async_journal import AsyncJournal, Notifying, Unfinished, Written, new_key

log = logging.getLogger("sagebox.runtime.async")

# MaxConcurrentInvocationsPerInstance when the endpoint config sets none ("SageMaker chooses an optimal value";
# the box sends an instance one request at a time, which its own batching then serves).
DEFAULT_PER_INSTANCE = 1
INPUT_LOCATION = "X-Amzn-SageMaker-InputLocation"
INFERENCE_ID = "X-Amzn-SageMaker-Inference-Id"
CONTENT_TYPE = "X-Amzn-SageMaker-Content-Type"
ACCEPT = "X-Amzn-SageMaker-Accept"
OUTPUT_LOCATION = "X-Amzn-SageMaker-OutputLocation"
FAILURE_LOCATION = "X-Amzn-SageMaker-FailureLocation"
S3_LOCATION = re.compile(r"^(?:s3|https)://(?P<bucket>[^/]+)/?(?P<key>.*)$")


class AsyncError(Exception):
    """An asynchronous request that cannot be read or answered (its failure file says why)."""


def split_s3(location: str) -> tuple[str, str]:
    match = S3_LOCATION.match(location)
    if match is None or not match["bucket"]:
        raise AsyncError(f"{location!r} is not an s3://bucket/key location")
    return match["bucket"], match["key"]


@dataclass(frozen=True)
class Locations:
    output: str
    failure: str


def locations(config: Mapping[str, Any], inference_id: str) -> Locations:
    """Where an answer and a failure of `inference_id` go (config: AsyncInferenceConfig as DescribeEndpoint has it)."""
    output = dict(config.get("OutputConfig") or {})
    out = str(output.get("S3OutputPath") or output.get("S3FailurePath") or "").rstrip("/")
    failed = str(output.get("S3FailurePath") or out).rstrip("/")
    return Locations(f"{out}/{inference_id}.out", f"{failed}/{inference_id}-error.out")


def per_instance(config: Mapping[str, Any]) -> int:
    value = (config.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance")
    return int(value) if value else DEFAULT_PER_INSTANCE


@dataclass(frozen=True)
class Job:
    endpoint: str
    inference_id: str
    input_location: str
    content_type: str
    accept: str | None
    custom_attributes: str | None
    config: Mapping[str, Any]  # the endpoint's AsyncInferenceConfig when the request came
    received_at: float  # epoch seconds
    key: str = ""  # its record in the gateway's journal ("": not journaled)
    resumed: bool = False  # accepted by a gateway that stopped before finishing it

    @property
    def where(self) -> Locations:
        return locations(self.config, self.inference_id)


_JOB_FIELDS = {f.name for f in dataclasses.fields(Job)}


def new_inference_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class Answer:
    """What the worker got for a job: the container's status, body and content type (status 0: no answer)."""

    status: int
    body: bytes
    content_type: str
    reason: str = ""  # why it failed, in one line (status >= 400 or 0)


def notification(job: Job, answer: Answer, region: str, now: datetime.datetime) -> dict[str, Any]:
    """The SNS message of an outcome, shaped as SageMaker's (async-inference-check-predictions)."""
    ok = 200 <= answer.status < 300
    where = job.where
    message: dict[str, Any] = {
        "awsRegion": region,
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "receivedTime": datetime.datetime.fromtimestamp(job.received_at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[
            :-3
        ]
        + "Z",
        "invocationStatus": "Completed" if ok else "Failed",
        "requestParameters": {
            "contentType": job.content_type,
            "endpointName": job.endpoint,
            "inputLocation": job.input_location,
        },
        "responseParameters": (
            {"contentType": answer.content_type, "outputLocation": where.output}
            if ok
            else {"contentType": answer.content_type, "failureLocation": where.failure}
        ),
        "inferenceId": job.inference_id,
        "eventVersion": "1.0",
        "eventSource": "aws:sagemaker",
        "eventName": "InferenceResult",
    }
    if not ok:
        message["failureReason"] = answer.reason or f"the model container answered {answer.status}"
    return message


def topic(job: Job, ok: bool) -> str | None:
    notify = (job.config.get("OutputConfig") or {}).get("NotificationConfig") or {}
    value = notify.get("SuccessTopic" if ok else "ErrorTopic")
    return str(value) if value else None


class AsyncStore(Protocol):
    """The S3 and SNS calls of the worker (blocking: the gateway runs them in its executor)."""

    def read(self, bucket: str, key: str) -> bytes: ...

    def write(self, bucket: str, key: str, body: bytes, content_type: str) -> None: ...

    def publish(self, topic_arn: str, message: str) -> None: ...


class EmbeddedAsyncStore:
    """S3 and SNS of the box's embedded AWS, found through the file it writes into the state directory."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._clients: dict[str, Any] = {}

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            import boto3

            from sagebox.box.embedded_aws.config import ACCESS_KEY, read_endpoint_file

            found = read_endpoint_file(self._state_dir)
            if found is None:
                raise AsyncError("the box's embedded AWS is not running (no S3 to read the input from)")
            client = self._clients[service] = boto3.client(
                service,
                endpoint_url=found.url,
                region_name=found.region,
                aws_access_key_id=ACCESS_KEY,
                aws_secret_access_key=ACCESS_KEY,
            )
        return client

    def _call(self, service: str, fn: Callable[[Any], Any]) -> Any:
        try:
            return fn(self._client(service))
        except AsyncError:
            raise
        except Exception as exc:
            self._clients.pop(service, None)  # the embedded AWS may have restarted: reconnect next time
            raise AsyncError(" ".join(str(exc).split())[:300]) from None

    def read(self, bucket: str, key: str) -> bytes:
        return bytes(self._call("s3", lambda s3: s3.get_object(Bucket=bucket, Key=key)["Body"].read()))

    def write(self, bucket: str, key: str, body: bytes, content_type: str) -> None:
        self._call("s3", lambda s3: s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type))

    def publish(self, topic_arn: str, message: str) -> None:
        self._call("sns", lambda sns: sns.publish(TopicArn=topic_arn, Message=message))

    def exists(self, bucket: str, key: str) -> str | None:
        """The object's content type when it exists, else None."""

        def head(s3: Any) -> str | None:
            try:
                return str(s3.head_object(Bucket=bucket, Key=key).get("ContentType") or "application/octet-stream")
            except Exception as exc:
                status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 404:
                    return None
                raise

        return self._call("s3", head)


@dataclass
class _Queue:
    waiting: deque[Job] = field(default_factory=deque)
    running: int = 0


class AsyncDispatcher:
    """Per-endpoint queues of asynchronous requests, each served by at most `capacity(endpoint)` workers at once.

    `invoke(job, body)` calls the endpoint's instance (the gateway's forwarding: picking, metrics) and returns the
    Answer; `store` reads inputs, writes outcomes and publishes them; blocking store calls run through `offload`."""

    def __init__(
        self,
        store: AsyncStore,
        invoke: Callable[[Job, bytes], Awaitable[Answer]],
        capacity: Callable[[str], int],
        region: str,
        offload: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        journal: AsyncJournal | None = None,
    ) -> None:
        self._store = store
        self._invoke = invoke
        self._capacity = capacity
        self._region = region
        self._offload = offload or _in_executor
        self._clock = clock
        self._queues: dict[str, _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.completed: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self._journal = journal
        self._resume: dict[str, Unfinished] = {}

    async def accept(self, job: Job) -> Job:
        """Journal the request (on disk before the caller answers 202), then queue it; the job as queued."""
        journal = self._journal
        if journal is not None:
            job = dataclasses.replace(job, key=new_key())
            await self._offload(lambda: journal.accepted(job.key, job))
        self.submit(job)
        return job

    def resume(self) -> int:
        """Queue again every request the journal holds unfinished (a gateway's start); how many."""
        if self._journal is None:
            return 0
        pending = self._journal.compact()
        for entry in pending:
            fields = {k: v for k, v in entry.job.items() if k in _JOB_FIELDS}
            job = dataclasses.replace(Job(**fields), key=entry.key, resumed=True)
            self._resume[entry.key] = entry
            self.submit(job)
        if pending:
            log.info("resumed %d asynchronous request(s) accepted before the gateway restarted", len(pending))
        return len(pending)

    def submit(self, job: Job) -> None:
        self._queues.setdefault(job.endpoint, _Queue()).waiting.append(job)
        self._kick(job.endpoint)

    def backlog(self, endpoint: str) -> int:
        """Requests queued or being processed (ApproximateBacklogSize)."""
        queue = self._queues.get(endpoint)
        return 0 if queue is None else len(queue.waiting) + queue.running

    def endpoints(self) -> list[str]:
        return list(self._queues)

    def _kick(self, endpoint: str) -> None:
        queue = self._queues[endpoint]
        while queue.waiting and queue.running < max(1, self._capacity(endpoint)):
            job = queue.waiting.popleft()
            queue.running += 1
            task = asyncio.get_running_loop().create_task(self._work(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _work(self, job: Job) -> None:
        try:
            await self.process(job)
        except Exception:  # never let one request stop the queue
            log.exception("async request %s of %s failed in the worker", job.inference_id, job.endpoint)
        finally:
            queue = self._queues[job.endpoint]
            queue.running -= 1
            self._kick(job.endpoint)

    async def process(self, job: Job) -> Answer:
        """Read the input, invoke, write the outcome, notify; the Answer (its status 0 when nothing answered).

        A journaled request records each step; one resumed from the journal skips the steps already done (an output
        already in S3 is not redone, a recorded notification is published word for word)."""
        resume = self._resume.pop(job.key, None) if job.key else None
        written = resume.written if resume is not None else None
        if resume is not None and written is None:
            written = await self._already_written(job)
        if written is None:
            answer = await self._answer(job)
            ok = 200 <= answer.status < 300
            where = job.where
            location = where.output if ok else where.failure
            payload = answer.body if ok or answer.body else answer.reason.encode()
            try:
                bucket, key = split_s3(location)
                await self._offload(lambda: self._store.write(bucket, key, payload, answer.content_type))
            except AsyncError as exc:
                log.warning(
                    "async request %s of %s: could not write %s: %s", job.inference_id, job.endpoint, location, exc
                )
                if self._journal is not None:  # left unfinished in the journal: the next gateway start retries it
                    return answer
            reason = "" if ok else answer.reason or f"the model container answered {answer.status}"
            written = Written(ok, answer.content_type, reason)
            self._record(lambda journal: journal.written(job.key, written), job)
        else:
            answer = Answer(200 if written.ok else 0, b"", written.content_type, written.reason)
        ok = written.ok
        (self.completed if ok else self.failed)[job.endpoint] = (self.completed if ok else self.failed).get(
            job.endpoint, 0
        ) + 1
        arn = topic(job, ok)
        if arn:
            notifying = resume.notifying if resume is not None and resume.notifying is not None else None
            if notifying is None:
                notifying = Notifying(arn, json.dumps(notification(job, answer, self._region, self._clock())))
                self._record(lambda journal: journal.notifying(job.key, notifying), job)
            message = notifying.message
            try:
                await self._offload(lambda: self._store.publish(notifying.topic, message))
            except AsyncError as exc:
                log.warning("async request %s of %s: could not notify %s: %s", job.inference_id, job.endpoint, arn, exc)
                if self._journal is not None:
                    return answer
        self._record(lambda journal: journal.done(job.key), job)
        return answer

    async def _answer(self, job: Job) -> Answer:
        try:
            bucket, key = split_s3(job.input_location)
            body = await self._offload(lambda: self._store.read(bucket, key))
        except AsyncError as exc:
            return Answer(0, b"", "text/plain", f"Failed to read the input from {job.input_location}: {exc}")
        return await self._invoke(job, body)

    def _record(self, write: Callable[[AsyncJournal], None], job: Job) -> None:
        """One journal record of a journaled job (blocking: an fsync, a few ms, in the worker's own order)."""
        if self._journal is not None and job.key:
            write(self._journal)

    async def _already_written(self, job: Job) -> Written | None:
        """A resumed request's outcome when it is in S3 already (the gateway died before recording it)."""
        exists = getattr(self._store, "exists", None)
        if exists is None:
            return None
        where = job.where
        for ok, location in ((True, where.output), (False, where.failure)):
            try:
                bucket, key = split_s3(location)
                found = await self._offload(lambda b=bucket, k=key: exists(b, k))  # type: ignore[misc]
            except AsyncError:
                return None
            if found is not None:
                reason = "" if ok else f"The request failed before the box restarted: see {where.failure}."
                return Written(ok, str(found), reason)
        return None

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _in_executor(fn: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn)
