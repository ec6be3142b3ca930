"""`compile_decoder`: a Hugging Face causal LM compiled the way NxD Inference compiles it, for emulated NeuronCores.

NxD Inference (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/nxd-inference/api-guides/api-guide.html,
NeuronConfig: tp_degree, batch_size, seq_len / max_length, buckets / context_encoding_buckets /
token_generation_buckets, torch_dtype) builds two models from one checkpoint: a context-encoding model (the prompt,
padded to a bucket, fills the KV cache and yields the first token's logits) and a token-generation model (one token
per sequence of a fixed batch, attending over the cache up to a bucket), each compiled once per bucket, sharded
over tp_degree NeuronCores with the KV cache resident on them. Here each is a set of neuron_emu traces
(neuron_emu.llm.graphs), the weights sharded per rank (neuron_emu.llm.shard), run by neuron_emu.llm.runtime.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from neuron_emu.compiler_args import AUTO_CAST_TYPES
from neuron_emu.llm.buckets import check_buckets
from neuron_emu.llm.cache import dtype_name
from neuron_emu.llm.config import read_config
from neuron_emu.llm.errors import DecoderCompileError
from neuron_emu.llm.graphs import trace_graphs
from neuron_emu.llm.runtime import EXECUTORS, NeuronDecoder, Settings, graph_spec
from neuron_emu.llm.shard import check_degree, shard
from neuron_emu.llm.weights import read_weights

AUTO_CASTS = ("matmult", "none")


class CompiledDecoder(NeuronDecoder):
    """A decoder just compiled: runs like a loaded one and can be saved (neuron_emu.llm.load reads it back)."""

    def save(self, directory: str | Path) -> Path:
        """Write the decoder's directory atomically (staged beside it, then renamed into place); returns its path."""
        from neuron_emu.llm.artifact import write_decoder

        return write_decoder(Path(directory), self)

    def _start_workers(self, **options: Any) -> None:
        """Run the ranks on worker processes (the "processes" executor), started on a scratch copy of this decoder's
        files (removed when they stop); the graphs and weights stay here too, to be saved."""
        from neuron_emu.llm.artifact import rank_file, write_decoder
        from neuron_emu.llm.processes import DecoderWorkers

        scratch = Path(tempfile.mkdtemp(prefix="neuron_emu_llm_"))
        try:
            directory = write_decoder(scratch / "decoder", self)
            files = [directory / rank_file(rank) for rank in range(self.tp_degree)]
            workers = DecoderWorkers(directory, files, scratch=scratch, **options)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._run_on(workers)


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DecoderCompileError(f"{name} must be a positive integer, got {value!r}")
    return value


def _max_length(value: object, buckets: Sequence[int] | None, max_positions: int) -> int:
    if value is None:
        if buckets and not isinstance(buckets, int | str):
            lengths = [b for b in buckets if isinstance(b, int) and not isinstance(b, bool)]
            value = max(lengths, default=max_positions)  # check_buckets refuses what is not a length
        else:
            value = max_positions
    length = _positive("max_length", value)
    if length > max_positions:
        raise DecoderCompileError(f"max_length {length} is past the model's {max_positions} positions")
    return length


def compiler_args(auto_cast: str, auto_cast_type: str) -> str:
    if auto_cast not in AUTO_CASTS:
        raise DecoderCompileError(f"auto_cast {auto_cast!r} is not one of: {', '.join(AUTO_CASTS)}")
    if auto_cast_type not in AUTO_CAST_TYPES:
        raise DecoderCompileError(f"auto_cast_type {auto_cast_type!r} is not one of: {', '.join(AUTO_CAST_TYPES)}")
    if auto_cast == "none":
        return "--auto-cast none"
    return f"--auto-cast {auto_cast} --auto-cast-type {auto_cast_type}"


def compile_decoder(
    config: Mapping[str, Any],
    weights: Mapping[str, torch.Tensor],
    *,
    tp_degree: int = 1,
    batch_size: int = 1,
    max_length: int | None = None,
    buckets: Sequence[int] | None = None,
    auto_cast: str = "matmult",
    auto_cast_type: str = "bf16",
    instance_family: str | None = None,
    executor: str = "in_process",
    **worker_options: Any,
) -> CompiledDecoder:
    """Compile a causal LM (its config.json as a dict, its transformers state dict) for `tp_degree` NeuronCores.

    `batch_size` lines generate together (fixed, as on the hardware); `max_length` (default: the model's positions,
    else the largest bucket) is the KV cache's length and the longest sequence; `buckets` (default: powers of two
    from 128 below max_length, then max_length) the lengths graphs are compiled for. `auto_cast` "matmult" rounds
    matmul operands to `auto_cast_type` (the compiler's default, bf16), "none" keeps fp32. `instance_family` (inf2,
    trn1) limits tp_degree to its NeuronLink degrees. `executor` "in_process" (the default) runs the ranks in this
    process, "processes" on one worker process per rank (`worker_options`: those of neuron_emu.llm.load). Everything
    refused is refused here, in one line.
    """
    if executor not in EXECUTORS:
        raise DecoderCompileError(f"executor {executor!r} is not one of: {', '.join(EXECUTORS)}")
    if worker_options and executor != "processes":
        raise DecoderCompileError(f"{', '.join(sorted(worker_options))} apply to executor='processes' only")
    if not isinstance(config, Mapping) and callable(getattr(config, "to_dict", None)):
        config = config.to_dict()  # a transformers PretrainedConfig
    decoder_config = read_config(config)
    layout = check_degree(decoder_config, tp_degree, instance_family)
    batch = _positive("batch_size", batch_size)
    length = _max_length(max_length, buckets, decoder_config.max_positions)
    ordered = check_buckets(buckets, length)
    args = compiler_args(auto_cast, auto_cast_type)
    model = read_weights(decoder_config, weights)
    ranks = shard(decoder_config, model, layout, length)
    settings = Settings(
        tp_degree=layout.tp_degree, batch_size=batch, max_length=length, buckets=ordered, auto_cast=auto_cast,
        auto_cast_type=auto_cast_type, compiler_args=args, cache_dtype=dtype_name(model.dtype),
        instance_family=instance_family,
    )  # fmt: skip
    spec = graph_spec(decoder_config, layout, batch, length)
    graphs = trace_graphs(spec, ranks[0], ordered, args, model.dtype)
    decoder = CompiledDecoder(config, settings, graphs, ranks)
    if executor == "processes":
        decoder._start_workers(**worker_options)
    return decoder
