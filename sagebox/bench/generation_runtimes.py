"""Decoder runtimes side by side: one decoding step and one prompt's prefill of the same FP32 weights in each
runtime Sagebox could serve a decoder LLM with, measured in one process, interleaved round-robin on the same inputs.

Candidates (`CANDIDATES`; each gets the same prompts, the same cache contents and the same thread count):
- `sagebox`: the serving engine's decoder as served (container/generation/decoder.py): prompt chunks through the
  Python layers, steps where every sequence decodes one token through the TorchScript layers (scripted.py);
- `sagebox-eager`: the same decoder object with its scripted layers off (every step through the Python layers);
- `transformers-static`: transformers' model, eager, with a `StaticCache` (the cache allocated once, as ours);
- `torch-compile`: the same model and cache, its forward through `torch.compile` (inductor, CPU, static shapes);
  the first call of each shape compiles (reported as `first_ms`), and each thread count compiles anew;
- `onnxruntime`: the model as one ONNX graph (exported here from a small Llama step written over the same weights)
  taking past keys/values and giving present ones, run by ONNX Runtime with IOBinding (past and present buffers
  bound once, no copy in or out besides the graph's own concatenation);
- `onnxruntime-genai`: onnxruntime-genai's own Llama graph (its model builder, `-p fp32 -e cpu`: GroupQueryAttention,
  past and present in one shared buffer) and generator, in another interpreter (`genai_python`, e.g. a scratch venv:
  it is never a dependency of Sagebox), driven over a pipe and timed inside that process;
- `generate`: transformers' `generate()` (greedy, its dynamic cache), one sequence: the gaps between its tokens.

A decoding step: B sequences, each with `context` tokens in its cache, one new token each, the logits of every
sequence out (greedy choice and sampling are not timed, except in generate() and onnxruntime-genai, whose steps
include their argmax). Each step decodes at the same position (the cache is rewritten at `context`, not grown),
except in onnxruntime-genai (its generator rewinds a batch only to 0, and a rewound single sequence measured about
twice as slow a step, as if it ran the model again: its context grows by one token a step, ~30 over a run) and
generate() (a few tokens each round from a fresh prompt). A prefill: one prompt of `prefill_tokens` into an empty
cache, the last token's logits out.

A candidate that cannot be set up (a missing package, an export or compile failure) is reported as skipped with one
line saying why; one that fails while measured stops being measured, with the reason. `check` gives any candidate's
logits after a batch of prompts and after one more token each: what tests/sagebox/bench/test_generation_runtimes.py
compares, so that a time compared is the time of the same computation.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from container.generation.decoder import Decoder

CANDIDATES = (
    "sagebox",
    "sagebox-eager",
    "transformers-static",
    "torch-compile",
    "onnxruntime",
    "onnxruntime-genai",
    "generate",
)
DESCRIPTIONS = {
    "sagebox": "Sagebox engine as served (eager prompt, TorchScript decode)",
    "sagebox-eager": "Sagebox engine, scripted layers off (all eager)",
    "transformers-static": "transformers eager, StaticCache",
    "torch-compile": "torch.compile (inductor, CPU) of transformers + StaticCache",
    "onnxruntime": "ONNX Runtime, past/present key values, IOBinding",
    "onnxruntime-genai": "onnxruntime-genai (model builder fp32 cpu, generator)",
    "generate": "transformers generate() (dynamic cache), one sequence",
}
CONTEXT = 200
PREFILL_TOKENS = 128
BATCHES = (1, 16)
ROUNDS = 20
THREADS = (2,)
WARMUP = 3  # TorchScript's profiling executor optimizes a graph after its first calls
EXPORTERS = ("dynamo", "torchscript")
GENERATE_TOKENS = 6  # tokens of each generate() round: its step time is the median gap between them


class Skip(Exception):
    """A candidate that cannot run here, with the one-line reason."""


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300]


# --- the candidates ---------------------------------------------------------------------------------------------------


class Runner:
    """One candidate. `fill` puts a batch of prompts in a cache of its own (one per batch size) and returns the logits
    after them; `step` times one decoding step of `batch` sequences at the filled context; `prefill` times one
    prompt into an empty cache; `check` gives the logits after prompts and after one token more."""

    name = ""
    batches: tuple[int, ...] | None = None  # None: any batch size
    setup_s: float | None = None  # export, build or load time
    setup_what = ""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def set_threads(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(self, batch: int) -> float:
        raise NotImplementedError

    def prefill(self, prompt: torch.Tensor) -> float:
        raise NotImplementedError

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, vocab] after `prompts` [B, L], then after one more token each (`follow` [B]: for candidates
        that choose their own tokens, generate() and onnxruntime-genai, it must be the greedy choice)."""
        raise NotImplementedError

    def close(self) -> None:
        """Free what the runner holds (its caches, another process)."""


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1e3


def load_decoder(model_dir: Path) -> Decoder:
    """The serving engine's decoder over the directory's config.json and model.safetensors, FP32."""
    from safetensors.torch import load_file

    from container.generation.decoder import Decoder
    from neuron_emu.llm.config import read_config

    config = read_config(json.loads((model_dir / "config.json").read_text(encoding="utf-8")))
    return Decoder(config, load_file(str(model_dir / "model.safetensors")), linear="fp32")


class SageboxRunner(Runner):
    """The engine's decoder through its own API (`Decoder.forward` with segments and a `KVCache`), as the engine
    calls it. `scripted=False` runs every step through the Python layers: the decoder has no public switch, so its
    scripted layers are set aside for this runner's calls (the decoder object may be shared by both runners)."""

    def __init__(self, decoder: Decoder, scripted: bool = True) -> None:
        super().__init__()
        self.name = "sagebox" if scripted else "sagebox-eager"
        self.decoder = decoder
        self.scripted = scripted
        self._layers = decoder._scripted
        if scripted and self._layers is None:
            raise Skip(f"no scripted layers for a {decoder.config.family} decoder: only the eager path exists")
        self.caches: dict[int, Any] = {}
        self.context: dict[int, int] = {}
        self.tokens: dict[int, torch.Tensor] = {}
        self._prefill_cache: Any = None

    @contextlib.contextmanager
    def _mode(self) -> Iterator[None]:
        self.decoder._scripted = self._layers if self.scripted else None
        try:
            yield
        finally:
            self.decoder._scripted = self._layers

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        import torch

        from container.generation.decoder import KVCache, Segment

        batch, length = prompts.shape
        cache = KVCache(self.decoder.config, batch, length + 8)
        with self._mode():
            logits = self.decoder.forward(
                prompts.reshape(-1), [Segment(i, 0, length) for i in range(batch)], cache
            ).clone()
        self.caches[batch], self.context[batch] = cache, length
        self.tokens[batch] = torch.argmax(logits, dim=-1)
        return logits

    def _step(self, batch: int, tokens: torch.Tensor) -> torch.Tensor:
        from container.generation.decoder import Segment

        length = self.context[batch]
        with self._mode():
            return self.decoder.forward(tokens, [Segment(i, length, 1) for i in range(batch)], self.caches[batch])

    def step(self, batch: int) -> float:
        tokens = self.tokens[batch]
        return _timed(lambda: self._step(batch, tokens))

    def prefill(self, prompt: torch.Tensor) -> float:
        from container.generation.decoder import KVCache, Segment

        if self._prefill_cache is None or self._prefill_cache.max_len < len(prompt):
            self._prefill_cache = KVCache(self.decoder.config, 1, len(prompt))
        cache = self._prefill_cache
        with self._mode():
            return _timed(lambda: self.decoder.forward(prompt, [Segment(0, 0, len(prompt))], cache))

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first = self.fill(prompts)
        return first, self._step(prompts.shape[0], follow).clone()

    def close(self) -> None:
        self.caches.clear()
        self._prefill_cache = None


def load_transformers(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()


class TransformersStaticRunner(Runner):
    """transformers' model with a StaticCache per batch size (`max_cache_len` = context + 8), the last token's
    logits only (`logits_to_keep=1`, as the engine computes them). `compiled`: its forward through torch.compile
    (default mode: "reduce-overhead" is CUDA graphs, nothing on a CPU), compiled again at each thread count
    (inductor's CPU kernels take the thread count when generated). Caches are filled by the eager forward."""

    def __init__(self, model: Any, compiled: bool = False) -> None:
        super().__init__()
        self.name = "torch-compile" if compiled else "transformers-static"
        self.model = model
        self.compiled = compiled
        self.forward: Callable[..., Any] = model.forward
        self.caches: dict[int, Any] = {}
        self.context: dict[int, int] = {}
        self.tokens: dict[int, torch.Tensor] = {}
        self._prefill_cache: Any = None
        if compiled:
            self._compile()

    def _compile(self) -> None:
        import torch

        torch._dynamo.reset()
        self.forward = torch.compile(self.model.forward, dynamic=False)

    def set_threads(self, threads: int) -> None:
        super().set_threads(threads)
        if self.compiled:
            self._compile()

    @staticmethod
    def _rewind(cache: Any, start: int) -> None:
        """The cache counts its own length (transformers 5): set back to `start` (each layer's counter in place)."""
        for layer in cache.layers:
            if layer.is_initialized:
                layer.cumulative_length.fill_(start)

    def _call(
        self, forward: Callable[..., Any], ids: torch.Tensor, cache: Any, start: int, rewind: bool = True
    ) -> torch.Tensor:
        """The logits after `ids` [B, S] written at `start` onwards (`rewind`: the cache set back there first)."""
        import torch

        if rewind:
            self._rewind(cache, start)
        with torch.no_grad():
            out = forward(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1]

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        import torch
        from transformers import StaticCache

        batch, length = prompts.shape
        cache = StaticCache(config=self.model.config, max_cache_len=length + 8)
        logits = self._call(self.model.forward, prompts, cache, 0).clone()
        self.caches[batch], self.context[batch] = cache, length
        self.tokens[batch] = torch.argmax(logits, dim=-1)[:, None]
        return logits

    def step(self, batch: int) -> float:
        tokens, cache, length = self.tokens[batch], self.caches[batch], self.context[batch]
        self._rewind(cache, length)  # not timed
        return _timed(lambda: self._call(self.forward, tokens, cache, length, rewind=False))

    def prefill(self, prompt: torch.Tensor) -> float:
        from transformers import StaticCache

        if self._prefill_cache is None:
            # Filled once by the eager forward: a cache's first use initializes it, which a compiled forward would
            # otherwise compile, and compile again for every later (initialized) call.
            self._prefill_cache = StaticCache(config=self.model.config, max_cache_len=len(prompt))
            self._call(self.model.forward, prompt[None], self._prefill_cache, 0)
        cache = self._prefill_cache
        self._rewind(cache, 0)
        return _timed(lambda: self._call(self.forward, prompt[None], cache, 0, rewind=False))

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first = self.fill(prompts)
        batch = prompts.shape[0]
        return first, self._call(self.forward, follow[:, None], self.caches[batch], self.context[batch]).clone()

    def close(self) -> None:
        self.caches.clear()
        self._prefill_cache = None


class GenerateRunner(Runner):
    """transformers' generate(), greedy, EOS suppressed (`min_new_tokens`): one sequence. A step is the median gap
    between the tokens of one generate() call (its stopping criteria are called once a token: they keep the
    times); a prefill is a whole generate() of one token (its per-call setup included)."""

    batches = (1,)

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.name = "generate"
        self.model = model
        self.prompts: dict[int, torch.Tensor] = {}

    def _generate(self, ids: torch.Tensor, tokens: int, **extra: Any) -> Any:
        import torch

        config = self.model.generation_config
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        with torch.no_grad():
            return self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                pad_token_id=pad,
                **extra,
            )

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        out = self._generate(prompts, 1, output_logits=True, return_dict_in_generate=True)
        self.prompts[prompts.shape[0]] = prompts
        return out.logits[0]

    def step(self, batch: int) -> float:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        times: list[float] = []

        class _Clock(StoppingCriteria):
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
                times.append(time.perf_counter())
                return torch.zeros(input_ids.shape[0], dtype=torch.bool)

        self._generate(self.prompts[batch], GENERATE_TOKENS, stopping_criteria=StoppingCriteriaList([_Clock()]))
        gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(times)]
        return statistics.median(gaps)

    def prefill(self, prompt: torch.Tensor) -> float:
        return _timed(lambda: self._generate(prompt[None], 1))

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self._generate(prompts, 2, output_logits=True, return_dict_in_generate=True)
        chosen = out.sequences[:, prompts.shape[1]]
        if not bool((chosen == follow).all()):
            raise ValueError("generate() chose other tokens than `follow`: it must be the greedy choice")
        return out.logits[0], out.logits[1]


# --- ONNX Runtime with past key values --------------------------------------------------------------------------------


def _llama_step_module(model: Any) -> Any:
    """A Llama decoding step over `model`'s weights as a torch module an ONNX exporter takes: (input_ids [B, S],
    past keys and values per layer [B, kv_heads, P, head_dim]) -> (the last token's logits [B, vocab], the present
    keys and values [B, kv_heads, P + S, head_dim]). Every row has the same P (no padding); RoPE and the causal mask
    follow from P. Query/key/value and gate/up are fused (as the engine's layers are)."""
    import torch
    import torch.nn.functional as F

    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    rope = getattr(config, "rope_parameters", None) or {}
    theta = float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    if rope.get("rope_type", "default") != "default":
        raise Skip(f"rope type {rope.get('rope_type')!r}: this export writes the default RoPE only")
    eps = float(config.rms_norm_eps)
    weights = {name: tensor.detach().float() for name, tensor in model.state_dict().items()}
    layers = config.num_hidden_layers

    class Step(torch.nn.Module):
        cos: torch.Tensor  # [max positions, head_dim] buffers
        sin: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Parameter(weights["model.embed_tokens.weight"], requires_grad=False)
            head = weights.get("lm_head.weight", weights["model.embed_tokens.weight"])
            self.head = torch.nn.Parameter(head.clone(), requires_grad=False)
            self.norm = torch.nn.Parameter(weights["model.norm.weight"], requires_grad=False)
            self.params = torch.nn.ParameterList()
            for i in range(layers):
                p = f"model.layers.{i}."
                a = p + "self_attn."
                qkv = torch.cat([weights[a + f"{n}_proj.weight"] for n in "qkv"])
                gate_up = torch.cat([weights[p + "mlp.gate_proj.weight"], weights[p + "mlp.up_proj.weight"]])
                for tensor in (
                    weights[p + "input_layernorm.weight"],
                    qkv,
                    weights[a + "o_proj.weight"],
                    weights[p + "post_attention_layernorm.weight"],
                    gate_up,
                    weights[p + "mlp.down_proj.weight"],
                ):
                    self.params.append(torch.nn.Parameter(tensor, requires_grad=False))
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
            freqs = torch.arange(config.max_position_embeddings, dtype=torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos())
            self.register_buffer("sin", emb.sin())

        def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            variance = x.pow(2).mean(-1, keepdim=True)
            return x * torch.rsqrt(variance + eps) * weight

        def forward(
            self, input_ids: torch.Tensor, past_keys: list[torch.Tensor], past_values: list[torch.Tensor]
        ) -> tuple[torch.Tensor, ...]:
            batch, length = input_ids.shape
            past = past_keys[0].shape[2]
            positions = torch.arange(length) + past
            cos, sin = self.cos[positions], self.sin[positions]  # [S, head_dim]
            visible = torch.arange(length + past)[None, :] <= positions[:, None]  # [S, P + S]
            x = self.embed[input_ids]
            presents_k: list[torch.Tensor] = []
            presents_v: list[torch.Tensor] = []
            half = head_dim // 2
            for i in range(layers):
                norm1, qkv_w, out_w, norm2, up_w, down_w = (self.params[6 * i + j] for j in range(6))
                qkv = self._norm(x, norm1) @ qkv_w.t()
                q = qkv[..., : heads * head_dim].reshape(batch, length, heads, head_dim).transpose(1, 2)
                k = qkv[..., heads * head_dim : (heads + kv_heads) * head_dim]
                k = k.reshape(batch, length, kv_heads, head_dim).transpose(1, 2)
                v = qkv[..., (heads + kv_heads) * head_dim :].reshape(batch, length, kv_heads, head_dim)
                v = v.transpose(1, 2)
                q = q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin
                k = k * cos + torch.cat((-k[..., half:], k[..., :half]), dim=-1) * sin
                keys = torch.cat((past_keys[i], k), dim=2)
                values = torch.cat((past_values[i], v), dim=2)
                presents_k.append(keys)
                presents_v.append(values)
                group = heads // kv_heads
                attended = F.scaled_dot_product_attention(
                    q, keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1), attn_mask=visible
                )
                x = x + attended.transpose(1, 2).reshape(batch, length, heads * head_dim) @ out_w.t()
                gate, up = (self._norm(x, norm2) @ up_w.t()).chunk(2, dim=-1)
                x = x + (F.silu(gate) * up) @ down_w.t()
            logits = self._norm(x[:, -1], self.norm) @ self.head.t()
            return (logits, *presents_k, *presents_v)

    return Step().eval()


def export_onnx_step(model: Any, path: Path, exporters: Sequence[str] = EXPORTERS) -> tuple[float, str]:
    """The decoding step as an ONNX graph at `path` (external data beside it): (seconds, the exporter used). The
    exporters in turn until one succeeds: torch.onnx's "dynamo" (torch.export) and "torchscript" (the legacy one,
    seconds where dynamo takes tens on a tiny model: the tests use it)."""
    import torch

    config = model.config
    kv_heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    layers = config.num_hidden_layers
    module = _llama_step_module(model)
    ids = torch.zeros(2, 3, dtype=torch.int64)
    past = [torch.zeros(2, kv_heads, 5, head_dim) for _ in range(layers)]
    names_in = ["input_ids", *[f"past_key_{i}" for i in range(layers)], *[f"past_value_{i}" for i in range(layers)]]
    names_out = ["logits", *[f"present_key_{i}" for i in range(layers)], *[f"present_value_{i}" for i in range(layers)]]
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    errors: list[str] = []
    for exporter in exporters:
        dynamo = exporter == "dynamo"
        try:
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
                options: dict[str, Any]
                if dynamo:
                    batch, seq, cached = torch.export.Dim("batch"), torch.export.Dim("seq"), torch.export.Dim("past")
                    shapes = {
                        "input_ids": {0: batch, 1: seq},
                        "past_keys": [{0: batch, 2: cached}] * layers,
                        "past_values": [{0: batch, 2: cached}] * layers,
                    }
                    options = {"dynamic_shapes": shapes, "external_data": True, "optimize": True, "verbose": False}
                else:
                    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch"}}
                    for name in names_in[1:]:
                        axes[name] = {0: "batch", 2: "past"}
                    for name in names_out[1:]:
                        axes[name] = {0: "batch", 2: "total"}
                    options = {"dynamic_axes": axes, "opset_version": 17}
                torch.onnx.export(
                    module,
                    (ids, past, [p.clone() for p in past]),
                    str(path),
                    input_names=names_in,
                    output_names=names_out,
                    dynamo=dynamo,
                    **options,
                )
            return time.perf_counter() - started, exporter
        except Exception as exc:
            errors.append(f"{exporter} exporter: {one_line(exc)}")
    raise Skip("; ".join(errors))


class OnnxRuntimeRunner(Runner):
    """ONNX Runtime (CPU provider, all graph optimizations, `threads` intra-op threads, sequential) over the
    exported step. Per batch size: the past (the prompt's present) and a present buffer bound once through IOBinding;
    each step reads the past and writes the present (the graph's Concat copies the cache: what past/present graphs
    cost without a shared buffer)."""

    def __init__(self, model: Any, work: Path, exporters: Sequence[str] = EXPORTERS) -> None:
        super().__init__()
        import onnxruntime as ort

        self.name = "onnxruntime"
        self.ort = ort
        config = model.config
        self.layers = config.num_hidden_layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.vocab = config.vocab_size
        self.path = work / "onnxruntime" / "step.onnx"
        self.setup_s, exporter = export_onnx_step(model, self.path, exporters)
        self.setup_what = f"export ({exporter} exporter)"
        self.notes.append(f"onnxruntime {ort.__version__}, exported with torch.onnx's {exporter} exporter")
        self.session: Any = None
        self.bindings: dict[int, Any] = {}
        self.pasts: dict[int, list[Any]] = {}
        self.context: dict[int, int] = {}
        self.threads = 0
        self.set_threads(1)

    def set_threads(self, threads: int) -> None:
        super().set_threads(threads)
        if threads == self.threads and self.session is not None:
            return
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        started = time.perf_counter()
        self.session = self.ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.notes.append(f"session at {threads} threads made in {time.perf_counter() - started:.1f} s")
        self.threads = threads
        # Bindings belong to a session: the caches are filled again after this.
        self.bindings.clear()
        self.pasts.clear()

    def _value(self, array: Any) -> Any:
        return self.ort.OrtValue.ortvalue_from_numpy(array)

    def _binding(self, ids: Any, pasts: Sequence[Any], present_len: int) -> tuple[Any, Any, list[Any]]:
        """An IOBinding of `ids` and the past OrtValues, with the logits and presents bound to new buffers."""
        import numpy as np

        batch = ids.shape[0]
        binding = self.session.io_binding()
        binding.bind_ortvalue_input("input_ids", self._value(ids))
        for i, value in enumerate(pasts):
            kind = "key" if i < self.layers else "value"
            binding.bind_ortvalue_input(f"past_{kind}_{i % self.layers}", value)
        logits = self._value(np.zeros((batch, self.vocab), dtype=np.float32))
        binding.bind_ortvalue_output("logits", logits)
        presents = []
        for i in range(2 * self.layers):
            kind = "key" if i < self.layers else "value"
            value = self._value(np.zeros((batch, self.kv_heads, present_len, self.head_dim), dtype=np.float32))
            binding.bind_ortvalue_output(f"present_{kind}_{i % self.layers}", value)
            presents.append(value)
        return binding, logits, presents

    def _empty_past(self, batch: int) -> list[Any]:
        import numpy as np

        return [self._value(np.zeros((batch, self.kv_heads, 0, self.head_dim), dtype=np.float32))] * (2 * self.layers)

    def _run(self, binding: Any) -> None:
        self.session.run_with_iobinding(binding)

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        import numpy as np
        import torch

        batch, length = prompts.shape
        binding, logits, presents = self._binding(prompts.numpy(), self._empty_past(batch), length)
        self._run(binding)
        first = torch.from_numpy(logits.numpy().copy())
        tokens = torch.argmax(first, dim=-1)[:, None].numpy().astype(np.int64)
        self.pasts[batch] = presents
        self.bindings[batch] = self._binding(tokens, presents, length + 1)
        self.context[batch] = length
        return first

    def step(self, batch: int) -> float:
        binding = self.bindings[batch][0]
        return _timed(lambda: self._run(binding))

    def prefill(self, prompt: torch.Tensor) -> float:
        binding = self._binding(prompt[None].numpy(), self._empty_past(1), len(prompt))[0]
        return _timed(lambda: self._run(binding))

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        first = self.fill(prompts)
        batch, length = prompts.shape
        binding, logits, _ = self._binding(follow[:, None].numpy(), self.pasts[batch], length + 1)
        self._run(binding)
        return first, torch.from_numpy(logits.numpy().copy())

    def close(self) -> None:
        self.bindings.clear()
        self.pasts.clear()
        self.session = None


# --- onnxruntime-genai, in another interpreter ------------------------------------------------------------------------


def genai_worker() -> None:
    """The onnxruntime-genai side (run by `genai_python`): JSON commands a line on stdin, JSON answers on stdout.
    Imports only onnxruntime_genai, numpy and the standard library."""
    import numpy as np
    import onnxruntime_genai as og

    model: Any = None
    generators: dict[int, Any] = {}
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the answers' pipe

    def answer(**values: Any) -> None:
        out.write(json.dumps(values) + "\n")
        out.flush()

    def generator(batch: int, max_length: int) -> Any:
        params = og.GeneratorParams(model)
        params.set_search_options(batch_size=batch, max_length=max_length, do_sample=False)
        return og.Generator(model, params)

    def logits(gen: Any) -> list[list[float]]:
        values = np.asarray(gen.get_logits(), dtype=np.float32)
        return values.reshape(values.shape[0], -1).tolist()

    answer(ok=True, version=og.__version__)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            command = request["cmd"]
            if command == "load":
                config = og.Config(request["model"])
                threads = int(request["threads"])
                options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
                config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
                generators.clear()
                model = None
                model = og.Model(config)
                answer(ok=True)
            elif command == "fill":
                prompts = np.asarray(request["prompts"], dtype=np.int32)
                batch, length = prompts.shape
                gen = generator(batch, length + int(request["room"]))
                gen.append_tokens(prompts)
                first = logits(gen)
                generators[batch] = gen
                answer(ok=True, logits=first if request.get("logits") else None)
            elif command == "step":
                batch = int(request["batch"])
                gen = generators[batch]
                started = time.perf_counter()
                gen.generate_next_token()  # chooses a token from the logits it has, runs the model on it
                answer(ok=True, ms=(time.perf_counter() - started) * 1e3)
            elif command == "prefill":
                prompt = np.asarray([request["prompt"]], dtype=np.int32)
                gen = generator(1, prompt.shape[1] + 2)
                started = time.perf_counter()
                gen.append_tokens(prompt)
                answer(ok=True, ms=(time.perf_counter() - started) * 1e3)
            elif command == "check":
                prompts = np.asarray(request["prompts"], dtype=np.int32)
                batch, length = prompts.shape
                gen = generator(batch, length + 4)
                gen.append_tokens(prompts)
                first = logits(gen)
                gen.generate_next_token()
                chosen = np.asarray(gen.get_next_tokens()).tolist()
                answer(ok=True, logits=first, chosen=chosen, second=logits(gen))
            else:
                answer(ok=False, error=f"unknown command {command!r}")
        except Exception as exc:
            answer(ok=False, error=one_line(exc))


def genai_build(python: str, model_dir: Path, out: Path) -> float | None:
    """onnxruntime-genai's model builder over the directory (fp32, cpu) into `out`: its seconds, None when `out`
    holds a build already."""
    if (out / "genai_config.json").is_file():
        return None
    scratch = out.with_name(out.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    command = [python, "-m", "onnxruntime_genai.models.builder", "-i", str(model_dir), "-o", str(scratch)]
    command += ["-p", "fp32", "-e", "cpu", "-c", str(out.with_name(out.name + ".cache"))]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not (scratch / "genai_config.json").is_file():
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line] or lines[-1:] or ["no output"]
        raise Skip(f"the model builder failed (exit {done.returncode}): {errors[-1].strip()[:240]}")
    shutil.rmtree(out, ignore_errors=True)
    scratch.rename(out)
    return time.perf_counter() - started


class GenaiRunner(Runner):
    """onnxruntime-genai's generator in `python` (an interpreter with onnxruntime_genai), over its model builder's
    graph of the same weights. A step is one `generate_next_token()` (the greedy choice from the logits it holds,
    then the model on that token), timed in that process; the context grows by one token a step."""

    def __init__(self, model_dir: Path, work: Path, python: str | None, room: int) -> None:
        super().__init__()
        self.name = "onnxruntime-genai"
        if python is None:
            try:
                import onnxruntime_genai  # noqa: F401
            except ImportError:
                raise Skip("onnxruntime_genai is not importable here and no --genai-python was given") from None
            python = sys.executable
        self.python = python
        self.room = room
        self.out = work / "onnxruntime-genai" / "model"
        self.out.parent.mkdir(parents=True, exist_ok=True)
        build_s = genai_build(python, model_dir, self.out)
        self.setup_s = build_s
        self.setup_what = "model builder" if build_s is not None else "model builder (built before: not timed)"
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from sagebox.bench.generation_runtimes import genai_worker; "
        )
        code += "genai_worker()"
        repo = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        self.process = subprocess.Popen(
            [python, "-c", code, repo], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        hello = self._ask()
        self.notes.append(f"onnxruntime-genai {hello.get('version')} in {python}")
        self.threads = 0

    def _ask(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        if request:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise Skip(f"the onnxruntime-genai worker ended (exit {self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise RuntimeError(f"onnxruntime-genai: {answer.get('error')}")
        return answer

    def set_threads(self, threads: int) -> None:
        super().set_threads(threads)
        if threads != self.threads:
            self._ask(cmd="load", model=str(self.out), threads=threads)
            self.threads = threads

    def fill(self, prompts: torch.Tensor) -> torch.Tensor:
        import torch

        answer = self._ask(cmd="fill", prompts=prompts.tolist(), room=self.room, logits=True)
        return torch.tensor(answer["logits"]) if answer.get("logits") else torch.empty(0)

    def step(self, batch: int) -> float:
        return float(self._ask(cmd="step", batch=batch)["ms"])

    def prefill(self, prompt: torch.Tensor) -> float:
        return float(self._ask(cmd="prefill", prompt=prompt.tolist())["ms"])

    def check(self, prompts: torch.Tensor, follow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        answer = self._ask(cmd="check", prompts=prompts.tolist())
        if answer["chosen"] != follow.tolist():
            raise ValueError("onnxruntime-genai chose other tokens than `follow`: it must be the greedy choice")
        return torch.tensor(answer["logits"]), torch.tensor(answer["second"])

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


# --- making them, measuring them --------------------------------------------------------------------------------------


@dataclass
class Made:
    runners: list[Runner]
    skipped: dict[str, str]  # candidate -> why it cannot run here


def make_runners(
    model_dir: Path,
    candidates: Sequence[str] = CANDIDATES,
    work: Path | None = None,
    genai_python: str | None = None,
    room: int = 64,
    say: Callable[[str], None] = lambda _: None,
) -> Made:
    """The candidates named, over the directory's weights (one Sagebox decoder and one transformers model shared
    by the candidates of each). `work` holds exports and builds; `room`: tokens onnxruntime-genai's batch may grow."""
    unknown = sorted(set(candidates) - set(CANDIDATES))
    if unknown:
        raise ValueError(f"unknown candidates {unknown} (known: {', '.join(CANDIDATES)})")
    work = work or Path(tempfile.mkdtemp(prefix="sagebox-runtimes-"))
    runners: list[Runner] = []
    skipped: dict[str, str] = {}
    shared: dict[str, Any] = {}

    def decoder() -> Any:
        if "decoder" not in shared:
            shared["decoder"] = load_decoder(model_dir)
        return shared["decoder"]

    def hf() -> Any:
        if "hf" not in shared:
            shared["hf"] = load_transformers(model_dir)
        return shared["hf"]

    makers: dict[str, Callable[[], Runner]] = {
        "sagebox": lambda: SageboxRunner(decoder(), scripted=True),
        "sagebox-eager": lambda: SageboxRunner(decoder(), scripted=False),
        "transformers-static": lambda: TransformersStaticRunner(hf()),
        "torch-compile": lambda: TransformersStaticRunner(hf(), compiled=True),
        "onnxruntime": lambda: OnnxRuntimeRunner(hf(), work),
        "onnxruntime-genai": lambda: GenaiRunner(model_dir, work, genai_python, room),
        "generate": lambda: GenerateRunner(hf()),
    }
    for name in candidates:
        say(f"setting up {name}")
        started = time.perf_counter()
        try:
            runner = makers[name]()
        except Skip as exc:
            skipped[name] = str(exc)
        except Exception as exc:
            skipped[name] = one_line(exc)
        else:
            if runner.setup_s is None and not runner.setup_what:
                runner.setup_s = time.perf_counter() - started
                runner.setup_what = "load"
            runners.append(runner)
        if name in skipped:
            say(f"  skipped: {skipped[name]}")
    return Made(runners, skipped)


@dataclass
class Measurement:
    samples_ms: list[float] = field(default_factory=list)
    first_ms: float | None = None  # the first call (a compile happens there), not among the samples

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.samples_ms) if self.samples_ms else None


@dataclass
class CandidateResult:
    name: str
    description: str
    skipped: str | None = None
    setup_s: float | None = None
    setup_what: str = ""
    decode: dict[int, dict[int, Measurement]] = field(default_factory=dict)  # threads -> batch -> a step
    prefill: dict[int, Measurement] = field(default_factory=dict)  # threads -> one prompt
    failures: dict[str, str] = field(default_factory=dict)  # "threads 2, batch 16" -> why it stopped
    notes: list[str] = field(default_factory=list)
    # Against the first candidate's logits after the same prompts (the largest batch): the largest absolute
    # difference, and whether every row's greedy token is the same.
    max_logit_diff: float | None = None
    same_greedy: bool | None = None


@dataclass
class Results:
    model_dir: str
    context: int
    prefill_tokens: int
    batches: list[int]
    threads: list[int]
    rounds: int
    candidates: list[CandidateResult]
    machine: dict[str, Any] = field(default_factory=dict)
    load: dict[str, dict[str, float]] = field(default_factory=dict)  # threads -> CPUs busy during the rounds

    def to_json(self) -> dict[str, Any]:
        rows = []
        for c in self.candidates:
            row: dict[str, Any] = {
                "name": c.name,
                "description": c.description,
                "skipped": c.skipped,
                "setup_s": None if c.setup_s is None else round(c.setup_s, 2),
                "setup_what": c.setup_what,
                "failures": c.failures,
                "notes": c.notes,
                "max_logit_diff_vs_first": c.max_logit_diff,
                "same_greedy_vs_first": c.same_greedy,
                "by_threads": {},
            }
            for threads in self.threads:
                entry: dict[str, Any] = {}
                for batch, m in c.decode.get(threads, {}).items():
                    median = m.median_ms
                    entry[f"decode_b{batch}"] = {
                        "median_ms": _round(median),
                        "tokens_per_s": _round(batch * 1e3 / median if median else None),
                        "first_ms": _round(m.first_ms),
                        "samples_ms": [round(s, 3) for s in m.samples_ms],
                    }
                p = c.prefill.get(threads)
                if p is not None:
                    median = p.median_ms
                    entry["prefill"] = {
                        "median_ms": _round(median),
                        "tokens_per_s": _round(self.prefill_tokens * 1e3 / median if median else None),
                        "first_ms": _round(p.first_ms),
                        "samples_ms": [round(s, 3) for s in p.samples_ms],
                    }
                row["by_threads"][str(threads)] = entry
            rows.append(row)
        return {
            "model_dir": self.model_dir,
            "context": self.context,
            "prefill_tokens": self.prefill_tokens,
            "batches": self.batches,
            "threads": self.threads,
            "rounds": self.rounds,
            "machine": self.machine,
            "load": self.load,
            "candidates": rows,
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def prompts_for(vocab: int, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    """Seeded token ids [batch, length], clear of the low ids where tokenizers keep their special tokens."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    low = 16 if vocab > 64 else 4
    return torch.randint(low, vocab, (batch, length), generator=generator, dtype=torch.int64)


def compare(result: CandidateResult, logits: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    """Record how `logits` (after the prompts) differ from the reference's (the first runner's, whose prompts' first
    rows are every runner's); returns the reference (the first logits given)."""
    import torch

    if reference is None:
        result.max_logit_diff, result.same_greedy = 0.0, True
        return logits
    rows = logits.shape[0]  # a candidate of one sequence (generate()) compares with the first row
    if logits.dim() != 2 or logits.shape[1] != reference.shape[1] or rows > reference.shape[0]:
        result.notes.append(f"logits {tuple(logits.shape)} are not comparable with the reference's")
        return reference
    result.max_logit_diff = float((logits.float() - reference[:rows].float()).abs().max())
    result.same_greedy = bool(torch.equal(logits.argmax(-1), reference[:rows].argmax(-1)))
    return reference


def run_rounds(
    runners: Sequence[Runner],
    results: dict[str, CandidateResult],
    vocab: int,
    batches: Sequence[int] = BATCHES,
    rounds: int = ROUNDS,
    threads: int = 2,
    context: int = CONTEXT,
    prefill_tokens: int = PREFILL_TOKENS,
    warmup: int = WARMUP,
    seed: int = 0,
    say: Callable[[str], None] = lambda _: None,
) -> None:
    """At `threads`: fill every runner's cache per batch size (comparing its logits after the prompts with the
    first runner's), warm each shape up (the first call kept as `first_ms`), then `rounds` rounds; in each, per batch
    size one step of every runner, then one prefill of every runner, the runners in an order rotated by one each
    round (none always first, or always after the same one). The samples go to `results`."""
    import torch

    prompts = prompts_for(vocab, max(batches), context, seed)
    prompt = prompts_for(vocab, 1, prefill_tokens, seed + 1)[0]
    alive = list(runners)

    def attempt(runner: Runner, where: str, call: Callable[[], Any]) -> Any:
        """`call()`, or None when it raised: then the runner is measured no more, and why is recorded."""
        try:
            return call()
        except Exception as exc:
            results[runner.name].failures[where] = one_line(exc)
            say(f"  {runner.name} failed at {where}: {one_line(exc)}")
            if runner in alive:
                alive.remove(runner)
            return None

    def sample(runner: Runner, where: str, call: Callable[[], float], into: Measurement, first: bool) -> None:
        ms = attempt(runner, where, call)
        if ms is None:
            return
        if first:
            into.first_ms = ms
        elif into.first_ms is not None or warmup == 0:
            into.samples_ms.append(ms)

    wanted = {r.name: [b for b in batches if r.batches is None or b in r.batches] for r in runners}
    reference: torch.Tensor | None = None
    for runner in list(alive):
        say(f"threads {threads}: filling {runner.name}'s caches")
        attempt(runner, f"threads {threads}", partial(runner.set_threads, threads))
        for batch in wanted[runner.name]:
            if runner not in alive:
                break
            logits = attempt(runner, f"threads {threads}, fill {batch}", partial(runner.fill, prompts[:batch]))
            if isinstance(logits, torch.Tensor) and logits.numel() and batch == max(wanted[runner.name]):
                reference = compare(results[runner.name], logits, reference)
    for runner in list(alive):
        result = results[runner.name]
        for batch in wanted[runner.name]:
            m = result.decode.setdefault(threads, {}).setdefault(batch, Measurement())
            for i in range(warmup):
                if runner in alive:
                    sample(runner, f"threads {threads}, batch {batch}", partial(runner.step, batch), m, i == 0)
        p = result.prefill.setdefault(threads, Measurement())
        for i in range(min(warmup, 2)):
            if runner in alive:
                sample(runner, f"threads {threads}, prefill", partial(runner.prefill, prompt), p, i == 0)
        if runner in alive:
            firsts = [f"B={b} {m.first_ms:.0f}" for b, m in result.decode[threads].items() if m.first_ms is not None]
            say(f"  {runner.name}: first calls {', '.join(firsts)}, prefill {p.first_ms or 0:.0f} ms")
    for index in range(rounds):
        shift = index % max(len(alive), 1)
        order = alive[shift:] + alive[:shift]
        for batch in batches:
            for runner in order:
                if runner in alive and batch in wanted[runner.name]:
                    m = results[runner.name].decode[threads][batch]
                    sample(runner, f"threads {threads}, batch {batch}", partial(runner.step, batch), m, False)
        for runner in order:
            if runner in alive:
                p = results[runner.name].prefill[threads]
                sample(runner, f"threads {threads}, prefill", partial(runner.prefill, prompt), p, False)
        say(f"threads {threads}: round {index + 1}/{rounds}")


def cpu_facts(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The CPU line, family and model, the flags the kernels pick by (sagebox/bench/machine.py's), and versions."""
    from sagebox.bench.machine import cpu_info

    facts: dict[str, Any] = dict(cpu_info(cpuinfo))
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    for key, name in (("model name", "model_name"), ("cpu family", "family"), ("model", "model_number")):
        found = re.search(rf"^{key}\s*:\s*(.*)$", text, re.MULTILINE)
        facts[name] = found.group(1).strip() if found else None
    facts["python"] = platform.python_version()
    versions: dict[str, str | None] = {}
    for package in ("torch", "transformers", "onnxruntime", "onnx", "onnxscript"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:
            versions[package] = None
    facts["versions"] = versions
    return facts


def measure(
    model_dir: Path,
    batches: Sequence[int] = BATCHES,
    rounds: int = ROUNDS,
    threads: Sequence[int] = THREADS,
    candidates: Sequence[str] = CANDIDATES,
    context: int = CONTEXT,
    prefill_tokens: int = PREFILL_TOKENS,
    work: Path | None = None,
    genai_python: str | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Results:
    """Every candidate on the directory's weights, at each thread count in turn, interleaved round-robin."""
    from sagebox.bench.machine import CpuSnapshot, load_between

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    vocab = int(config["vocab_size"])
    made = make_runners(model_dir, candidates, work, genai_python, room=rounds + WARMUP + 8, say=say)
    results = {name: CandidateResult(name, DESCRIPTIONS[name], skipped=made.skipped.get(name)) for name in candidates}
    for runner in made.runners:
        results[runner.name].setup_s = runner.setup_s
        results[runner.name].setup_what = runner.setup_what
    load: dict[str, dict[str, float]] = {}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        for count in threads:
            start = CpuSnapshot.take()
            run_rounds(made.runners, results, vocab, batches, rounds, count, context, prefill_tokens, WARMUP, say=say)
            load[str(count)] = load_between(start, CpuSnapshot.take(), cpus)
    finally:
        for runner in made.runners:
            results[runner.name].notes.extend(runner.notes)
            runner.close()
    return Results(
        str(model_dir),
        context,
        prefill_tokens,
        list(batches),
        list(threads),
        rounds,
        [results[name] for name in candidates],
        cpu_facts(),
        load,
    )


def table(results: Results) -> str:
    """One line a candidate and thread count: ms a step (tokens/s) at each batch, prefill ms, setup."""
    head = ["candidate", "threads"]
    head += [f"B={b} ms/step (tok/s)" for b in results.batches]
    head += [f"prefill {results.prefill_tokens} ms", "setup s", "first call ms"]
    lines = [head]
    for c in results.candidates:
        if c.skipped is not None:
            lines.append([c.name, "-", f"skipped: {c.skipped}"])
            continue
        for threads in results.threads:
            row = [c.name, str(threads)]
            for batch in results.batches:
                m = c.decode.get(threads, {}).get(batch)
                median = m.median_ms if m is not None else None
                row.append(f"{median:.2f} ({batch * 1e3 / median:.1f})" if median else "-")
            p = c.prefill.get(threads)
            prefill = p.median_ms if p is not None else None
            row.append(f"{prefill:.1f}" if prefill else "-")
            row.append(f"{c.setup_s:.1f} ({c.setup_what})" if c.setup_s is not None else c.setup_what or "-")
            firsts = [m.first_ms for m in c.decode.get(threads, {}).values() if m.first_ms is not None]
            row.append("/".join(f"{f:.0f}" for f in firsts) or "-")
            lines.append(row)
        for where, why in c.failures.items():
            lines.append([c.name, "", f"failed at {where}: {why}"])
    widths = [max(len(line[i]) for line in lines if i < len(line) and len(line) > 3) for i in range(len(head))]
    out = []
    for line in lines:
        if len(line) <= 3:
            out.append("  ".join(line))
        else:
            out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)))
    return "\n".join(out)
