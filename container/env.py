"""Every environment variable the serving container reads, with typed accessors and defaults."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from container.cpu_kind import CPU_KIND_VARIABLE, RUNTIME_CHOICES, RUNTIME_VARIABLE, detect
from container.errors import ContainerError

# SageMaker's own names (the hosting platform sets these).
BIND_TO_PORT = "SAGEMAKER_BIND_TO_PORT"
MODEL_SERVER_WORKERS = "SAGEMAKER_MODEL_SERVER_WORKERS"
MODEL_SERVER_TIMEOUT = "SAGEMAKER_MODEL_SERVER_TIMEOUT"
# Sagebox's names.
MODEL_DIR = "SAGEBOX_MODEL_DIR"
MAX_BATCH_SIZE = "SAGEBOX_MAX_BATCH_SIZE"
MAX_BATCH_TOKENS = "SAGEBOX_MAX_BATCH_TOKENS"
MAX_BATCH_WAIT_MS = "SAGEBOX_MAX_BATCH_WAIT_MS"
DOC_STRIDE = "SAGEBOX_DOC_STRIDE"
MAX_ANSWER_TOKENS = "SAGEBOX_MAX_ANSWER_TOKENS"
MAX_FEATURES_PER_REQUEST = "SAGEBOX_MAX_FEATURES_PER_REQUEST"
MAX_BODY_BYTES = "SAGEBOX_MAX_BODY_BYTES"
INTRA_OP_THREADS = "SAGEBOX_INTRA_OP_THREADS"
SPIN_WAIT = "SAGEBOX_SPIN_WAIT"
FLUSH_DENORMALS = "SAGEBOX_FLUSH_DENORMALS"
DRAIN_SECONDS = "SAGEBOX_DRAIN_SECONDS"
ADMISSION_CONTROL = "SAGEBOX_ADMISSION_CONTROL"
LOG_LEVEL = "SAGEBOX_LOG_LEVEL"
SERVICE_USER = "SAGEBOX_SERVICE_USER"
BIND_HOST = "SAGEBOX_BIND_HOST"
# How far the HTTP side (event loop, tokenizing) yields the CPU to the inference thread (container/priorities.py).
HTTP_NICE = "SAGEBOX_HTTP_NICE"
# A listening socket the server inherits (its file descriptor), instead of binding a port itself: the box's serving
# processes get one bound by their launcher, so no other process can take the port between choosing and binding it.
LISTEN_FD = "SAGEBOX_LISTEN_FD"
# Which of a model's builds to load (container/cpu_kind.py): "auto" (the manifest's choice for this CPU kind) or a
# runtime the model directory has a build for; and the CPU kind, forced instead of read from /proc/cpuinfo.
RUNTIME = RUNTIME_VARIABLE
CPU_KIND = CPU_KIND_VARIABLE
# Memory (MB) OpenVINO may spend on batch-1 graphs compiled per sequence bucket (container/handlers/openvino.py).
STATIC_SHAPES_MB = "SAGEBOX_STATIC_SHAPES_MB"

# Text generation (container/generation/), under the names TGI's container reads on SageMaker
# (https://huggingface.co/docs/text-generation-inference/en/reference/launcher), so an endpoint configured for TGI
# means the same here. 0 (or unset) derives the value from the model and the memory (container/generation/limits.py).
MAX_TOTAL_TOKENS = "MAX_TOTAL_TOKENS"  # prompt plus generated tokens of one request
MAX_BATCH_TOTAL_TOKENS = "MAX_BATCH_TOTAL_TOKENS"  # tokens the key/value cache holds over all running sequences
MAX_BATCH_PREFILL_TOKENS = "MAX_BATCH_PREFILL_TOKENS"  # prompt tokens prefilled per step (chunked prefill)
MAX_CONCURRENT_REQUESTS = "MAX_CONCURRENT_REQUESTS"  # generations running or waiting; more are refused (503)
DEFAULT_MAX_NEW_TOKENS = "SAGEBOX_DEFAULT_MAX_NEW_TOKENS"  # generated when a request names no limit

# The shapes a decoder LLM was compiled for, under the names SageMaker's LLM containers read, each with its spellings
# (first the name the messages use). A model compiled for NeuronCores has fixed shapes: a value that contradicts the
# artifact fails start-up (container/generation/limits.py); on the CPU engine the batch size is the cache's slots.
# - LMI (DJL Serving): `TENSOR_PARALLEL_DEGREE` / `OPTION_TENSOR_PARALLEL_DEGREE` (a number or `max`: all the cores
#   there are), `OPTION_MAX_ROLLING_BATCH_SIZE`, `OPTION_N_POSITIONS` (input plus output tokens, Transformers-NeuronX):
#   https://docs.djl.ai/docs/serving/serving/docs/lmi/deployment_guide/configurations.html and
#   https://docs.djl.ai/docs/serving/serving/docs/lmi/user_guides/tnx_user_guide.html
# - TGI on Neuron: `HF_NUM_CORES`, `HF_AUTO_CAST_TYPE`, and TGI's `MAX_BATCH_SIZE` and `MAX_TOTAL_TOKENS`, which "must
#   be set to" the compiled batch size and max length (https://huggingface.co/docs/text-generation-inference/backends/
#   neuron, "Choosing service parameters"); `HF_BATCH_SIZE` is the batch size of the earlier Hugging Face Neuron LLM
#   images for SageMaker (with `HF_NUM_CORES` and `HF_AUTO_CAST_TYPE`).
TENSOR_PARALLEL_DEGREE = "TENSOR_PARALLEL_DEGREE"
OPTION_TENSOR_PARALLEL_DEGREE = "OPTION_TENSOR_PARALLEL_DEGREE"
HF_NUM_CORES = "HF_NUM_CORES"
TENSOR_PARALLEL_NAMES = (TENSOR_PARALLEL_DEGREE, OPTION_TENSOR_PARALLEL_DEGREE, HF_NUM_CORES)
OPTION_MAX_ROLLING_BATCH_SIZE = "OPTION_MAX_ROLLING_BATCH_SIZE"
HF_BATCH_SIZE = "HF_BATCH_SIZE"
TGI_MAX_BATCH_SIZE = "MAX_BATCH_SIZE"  # TGI's; not SAGEBOX_MAX_BATCH_SIZE (MAX_BATCH_SIZE here: the encoders' batcher)
BATCH_SIZE_NAMES = (OPTION_MAX_ROLLING_BATCH_SIZE, HF_BATCH_SIZE, TGI_MAX_BATCH_SIZE)
OPTION_N_POSITIONS = "OPTION_N_POSITIONS"
TOTAL_TOKENS_NAMES = (MAX_TOTAL_TOKENS, OPTION_N_POSITIONS)
HF_AUTO_CAST_TYPE = "HF_AUTO_CAST_TYPE"
# HF_AUTO_CAST_TYPE's values (optimum-neuron's map_torch_dtype reads both spellings) -> the compiler's short names.
AUTO_CAST_TYPES = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "fp32": "fp32", "float32": "fp32",
}  # fmt: skip
# Every text-generation variable (infra/plan.py accepts these in a target's environment beside the SAGEBOX_ ones).
TGI_VARIABLES = (
    MAX_BATCH_TOTAL_TOKENS,
    MAX_BATCH_PREFILL_TOKENS,
    MAX_CONCURRENT_REQUESTS,
    *TOTAL_TOKENS_NAMES,
    *TENSOR_PARALLEL_NAMES,
    *BATCH_SIZE_NAMES,
    HF_AUTO_CAST_TYPE,
)

DEFAULT_MODEL_DIR = "/opt/ml/model"
# The image's unprivileged account (container/Dockerfile): a root server drops to it once the model is loaded.
DEFAULT_SERVICE_USER = "sagebox"
SIX_MB = 6 * 1024 * 1024
# Padded tokens per model call. BERT-base INT8 on 2 cores: a batch of 8 windows ran 0.87-0.91x per sample at 256-384
# tokens, ~1x at 128, 1.16-1.26x at 64 (scripts/bench_serving.py, batching_ceiling): long windows run alone or in pairs.
DEFAULT_MAX_BATCH_TOKENS = 512
# Measured with the INT8 demo model on one CPU, 48 clients retrying every 503 at once (container/priorities.py):
# nice 0 left the model 57 % of the CPU, 5 gave it 76 %, 7 83 % with refusals answered in 15 ms (P50), 10 89 % with
# refusals taking 45-80 ms (a niced event loop goes round its connections more slowly).
DEFAULT_HTTP_NICE = 7

T = TypeVar("T")


class EnvError(ContainerError, ValueError):
    """An environment variable holds a value the server cannot use."""


def _int(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise EnvError(f"{name} must be {bound}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:
        raise EnvError(f"{name} must be >= {minimum}, got {value}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise EnvError(f"{name} must be 1/true/yes/on or 0/false/no/off, got {raw!r}")


@dataclass(frozen=True)
class Named(Generic[T]):
    """A setting and the variable that gave it: the one line a contradiction fails with names what was set."""

    value: T
    variable: str


def _spellings(
    env: Mapping[str, str], names: Sequence[str], parse: Callable[[str, str], T], unset: object = None
) -> Named[T] | None:
    """The one value of a setting that several variables spell; None when none is set (or each is set to `unset`).
    Two that disagree are refused."""
    raw = {name: env[name].strip() for name in names if env.get(name, "").strip()}
    found = [(name, value) for name, value in ((n, parse(n, raw[n])) for n in raw) if value != unset]
    if not found:
        return None
    first_name, first = found[0]
    for name, value in found[1:]:
        if value != first:
            raise EnvError(f"{first_name} {raw[first_name]} and {name} {raw[name]} disagree: set one of them")
    return Named(first, first_name)


def _positive(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise EnvError(f"{name} must be >= 1, got {value}")
    return value


def _count(name: str, raw: str) -> int:
    """A count where 0 means "derive it" (TGI's token limits)."""
    return 0 if raw == "0" else _positive(name, raw)


def _degree(name: str, raw: str) -> int:
    """A tensor-parallel degree; LMI's `max` (all the cores there are) is 0: no particular degree asked for."""
    return 0 if raw.lower() == "max" and name != HF_NUM_CORES else _positive(name, raw)


def _cast_type(name: str, raw: str) -> str:
    value = AUTO_CAST_TYPES.get(raw.lower())
    if value is None:
        raise EnvError(f"{name} must be one of {', '.join(AUTO_CAST_TYPES)}, got {raw!r}")
    return value


def _user(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip()
    if value and not all(c.isalnum() or c in "._-" for c in value):
        raise EnvError(f"{name} must be an account name or uid (letters, digits, '.', '_', '-'), got {value!r}")
    return value


def _runtime_pin(env: Mapping[str, str]) -> str:
    value = env.get(RUNTIME, "").strip().lower() or "auto"
    if value not in RUNTIME_CHOICES:
        raise EnvError(f"{RUNTIME} must be one of {', '.join(RUNTIME_CHOICES)}; got {value!r}")
    return value


def _cpu_kind(env: Mapping[str, str]) -> str:
    try:
        return detect(env)
    except ValueError as exc:
        raise EnvError(str(exc)) from None


def _host(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip() or default
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise EnvError(f"{name} must be an IP address to listen on (0.0.0.0, 127.0.0.1, ::), got {value!r}") from None
    return value


def available_cpus() -> int:
    """CPUs this process may use: scheduler affinity, capped by a cgroup v2/v1 CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:
        count = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        count = max(1, min(count, quota))
    return count


def memory_bytes() -> int:
    """The memory this process may use: the cgroup v2/v1 limit where one is set, else the machine's total."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:
            return int(raw)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 4 << 30


def _cgroup_cpu_quota() -> int | None:
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            return max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        if quota_us > 0 and period_us > 0:
            return max(1, -(-quota_us // period_us))
    except (OSError, ValueError):
        pass
    return None


@dataclass(frozen=True)
class ServerSettings:
    port: int
    # 0.0.0.0 in a container (its own network namespace); the box's serving processes listen on 127.0.0.1.
    bind_host: str
    workers: int
    timeout_s: int
    model_dir: Path
    max_batch_size: int
    max_batch_tokens: int
    max_batch_wait_ms: float
    doc_stride: int
    max_answer_tokens: int
    max_features_per_request: int
    max_body_bytes: int
    intra_op_threads: int
    spin_wait: bool
    flush_denormals: bool
    drain_seconds: int
    # Refuse (503) a request that the work already queued would push past its timeout (container/admission.py).
    admission_control: bool
    log_level: str
    # Started as root (SageMaker's contract), the server serves as this account; empty: keep the identity it has.
    service_user: str
    # An inherited listening socket (LISTEN_FD); None (every container): bind `bind_host`:`port`.
    listen_fd: int | None = None
    # The nice value the HTTP thread adds to its own once the inference thread runs (0: none; container/priorities.py).
    http_nice: int = 0
    # The text-generation engine's intra-op threads: intra_op_threads, but never every CPU a worker has: one is left
    # to the event loop that streams the tokens (at least 1 thread). An intra-op thread that the HTTP side preempts
    # stalls every parallel call of the step: on 2 CPUs (machine A, demo LLM INT8, clients on the same CPUs) 1 thread
    # streamed 74 tokens/s at one stream and 244 at 16, 2 threads 38 and 178; in process, without HTTP, 1 and 2
    # threads decoded alike (~12 ms a token). vLLM's CPU backend reserves CPUs for its API server for the same reason.
    # 0: the same as intra_op_threads.
    generation_threads: int = 0
    # Text generation; 0: derived from the model and the memory.
    max_total_tokens: int = 0
    max_batch_total_tokens: int = 0
    max_batch_prefill_tokens: int = 256
    max_concurrent_requests: int = 128
    default_max_new_tokens: int = 256
    # The variable that set max_total_tokens (MAX_TOTAL_TOKENS or LMI's OPTION_N_POSITIONS), for messages.
    max_total_tokens_variable: str = MAX_TOTAL_TOKENS
    # A decoder's compiled shapes as the LMI/TGI variables ask for them; None: not set (the artifact's hold). A tensor
    # parallel degree of 0 is LMI's `max`.
    tensor_parallel_degree: Named[int] | None = None
    llm_batch_size: Named[int] | None = None
    auto_cast_type: Named[str] | None = None
    # The build to load: "auto" (the manifest's choice for cpu_kind) or a runtime name (container/cpu_kind.py).
    runtime_pin: str = "auto"
    cpu_kind: str = "other"
    static_shapes_mb: int | None = None

    @property
    def engine_threads(self) -> int:
        """The text-generation engine's intra-op threads."""
        return self.generation_threads or self.intra_op_threads

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if env is None else env
        workers = _int(env, MODEL_SERVER_WORKERS, 1, 1, 64)
        default_threads = max(1, available_cpus() // workers)
        intra_op_threads = _int(env, INTRA_OP_THREADS, default_threads, 1)
        log_level = env.get(LOG_LEVEL, "info").strip().lower() or "info"
        if log_level not in {"critical", "error", "warning", "info", "debug"}:
            raise EnvError(f"{LOG_LEVEL} must be one of critical, error, warning, info, debug; got {log_level!r}")
        total_tokens = _spellings(env, TOTAL_TOKENS_NAMES, _count, unset=0)
        return cls(
            port=_int(env, BIND_TO_PORT, 8080, 1, 65535),
            bind_host=_host(env, BIND_HOST, "0.0.0.0"),
            workers=workers,
            timeout_s=_int(env, MODEL_SERVER_TIMEOUT, 60, 1),
            model_dir=Path(env.get(MODEL_DIR, "").strip() or DEFAULT_MODEL_DIR),
            max_batch_size=_int(env, MAX_BATCH_SIZE, 8, 1, 256),
            max_batch_tokens=_int(env, MAX_BATCH_TOKENS, DEFAULT_MAX_BATCH_TOKENS, 1),
            max_batch_wait_ms=_float(env, MAX_BATCH_WAIT_MS, 0.0, 0.0),
            doc_stride=_int(env, DOC_STRIDE, 128, 0),
            max_answer_tokens=_int(env, MAX_ANSWER_TOKENS, 30, 1),
            max_features_per_request=_int(env, MAX_FEATURES_PER_REQUEST, 256, 1),
            max_body_bytes=_int(env, MAX_BODY_BYTES, SIX_MB, 1),
            intra_op_threads=intra_op_threads,
            generation_threads=min(intra_op_threads, max(1, default_threads - 1)),
            # Intra-op threads spin between the ops of a call (never after it); off saves CPU, costs latency.
            spin_wait=_bool(env, SPIN_WAIT, True),
            flush_denormals=_bool(env, FLUSH_DENORMALS, True),
            drain_seconds=_int(env, DRAIN_SECONDS, 25, 0, 30),
            admission_control=_bool(env, ADMISSION_CONTROL, True),
            log_level=log_level,
            service_user=_user(env, SERVICE_USER, DEFAULT_SERVICE_USER),
            listen_fd=_int(env, LISTEN_FD, -1, 0) if env.get(LISTEN_FD, "").strip() else None,
            http_nice=_int(env, HTTP_NICE, DEFAULT_HTTP_NICE, 0, 19),
            max_total_tokens=total_tokens.value if total_tokens else 0,
            max_total_tokens_variable=total_tokens.variable if total_tokens else MAX_TOTAL_TOKENS,
            max_batch_total_tokens=_int(env, MAX_BATCH_TOTAL_TOKENS, 0, 0),
            max_batch_prefill_tokens=_int(env, MAX_BATCH_PREFILL_TOKENS, 256, 1),
            max_concurrent_requests=_int(env, MAX_CONCURRENT_REQUESTS, 128, 1),
            default_max_new_tokens=_int(env, DEFAULT_MAX_NEW_TOKENS, 256, 1),
            tensor_parallel_degree=_spellings(env, TENSOR_PARALLEL_NAMES, _degree),
            llm_batch_size=_spellings(env, BATCH_SIZE_NAMES, _positive),
            auto_cast_type=_spellings(env, (HF_AUTO_CAST_TYPE,), _cast_type),
            runtime_pin=_runtime_pin(env),
            cpu_kind=_cpu_kind(env),
            static_shapes_mb=_int(env, STATIC_SHAPES_MB, 0, 0) if env.get(STATIC_SHAPES_MB, "").strip() else None,
        )
