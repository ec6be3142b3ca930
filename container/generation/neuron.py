"""A decoder LLM compiled for NeuronCores, presented to the generation engine.

A compiled decoder (NxD Inference's way, emulated by `neuron_emu.llm`) has a fixed number of batch lines, each with
its key/value cache held on the device, and two kinds of graph: context encoding takes one line's whole prompt (and
rewrites that line's cache), token generation takes one token for each active line at once. The engine's continuous
batching maps onto that as it is: a cache slot is a batch line, a new sequence's prompt is context-encoded into a free
line, and every running sequence decodes together in one token-generation call per step. Prompts go in whole: the
engine runs with `whole_prompts` (no chunked prefill, which a compiled context-encoding graph cannot continue).

Two backends, as for the encoders (container/handlers/neuron.py), by the manifest's `compile.backend`:
- `neuron_emu`: `neuron_emu.llm.load` runs the graphs on the host CPU (above tensor parallel 1, one worker
  process per rank, gloo all-reduces between them);
  it serves anywhere, and on an inf2/trn1 instance it is CPU inference (synthesis refuses that unless allowed).
- `torch_neuronx`: a decoder compiled by NxD Inference runs only on NeuronCores, through `neuronx_distributed_inference`
  in the Neuron image. Sagebox does not serve those yet: such a directory is refused at load with one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from container.generation.decoder import Segment
from container.manifest import ManifestError

NXDI_MISSING = (
    "this decoder was compiled by NxD Inference (compile.backend torch_neuronx) and needs a Neuron host with "
    "neuronx_distributed_inference (the Neuron image on an inf2/trn1 instance): it cannot be imported here"
)
NXDI_NOT_SERVED = (
    "this decoder was compiled by NxD Inference (compile.backend torch_neuronx): Sagebox's server does not run NxD "
    "Inference decoders yet; compile the model with `sagebox compile --backend neuron-emu`"
)


@dataclass(frozen=True)
class CompiledShape:
    """What a compiled decoder fixed at compile time: the LMI/TGI settings are checked against it."""

    tensor_parallel: int
    batch_size: int
    max_length: int
    buckets: tuple[int, ...]
    auto_cast_type: str  # "fp32" when nothing was cast


class NeuronSteps:
    """The engine's model step over a compiled decoder: slots are its batch lines, `max_len` its max length."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.slots = int(decoder.batch_size)
        self.max_len = int(decoder.max_length)

    def forward(self, tokens: torch.Tensor, segments: Sequence[Segment], cache: object = None) -> torch.Tensor:
        """Logits [len(segments), vocab]: each segment that starts a sequence is its whole prompt, context-encoded into
        its line; every one-token segment is decoded in one token-generation call. (`cache` is the engine's handle on
        the slots, this object: the cache itself is the decoder's, on the device.)"""
        rows: list[torch.Tensor | None] = [None] * len(segments)
        decoding: dict[int, int] = {}  # line -> its token
        positions: dict[int, int] = {}  # line -> that token's position
        decoded_row: dict[int, int] = {}  # line -> its row of the answer
        prompts: list[tuple[int, int, list[int]]] = []  # (row, line, prompt ids)
        offset = 0
        for row, segment in enumerate(segments):
            ids = [int(i) for i in tokens[offset : offset + segment.length].tolist()]
            offset += segment.length
            if segment.start == 0:
                prompts.append((row, segment.slot, ids))
            elif segment.length == 1:
                decoding[segment.slot], positions[segment.slot], decoded_row[segment.slot] = ids[0], segment.start, row
            else:
                raise ValueError(
                    f"a compiled decoder takes a prompt whole: line {segment.slot} was given {segment.length} tokens "
                    f"at position {segment.start} (the engine must run with whole_prompts)"
                )
        if decoding:  # first: a line context-encoded below is then written by nothing else this step
            logits = self.decoder.token_generate(decoding, positions)
            for line, row in decoded_row.items():
                rows[row] = logits[line]
        for row, line, ids in prompts:
            rows[row] = self.decoder.context_encode(line, ids)
        return torch.stack([row.float() for row in rows if row is not None])

    def serve_as(self, uid: int, gid: int) -> None:
        """The decoder's worker processes (tensor parallel above 1) take uid/gid, as the server does after loading."""
        self.decoder.become(uid, gid)

    def close(self) -> None:
        self.decoder.close()


def shape_of(decoder: Any, auto_cast: str, auto_cast_type: str) -> CompiledShape:
    return CompiledShape(
        tensor_parallel=int(decoder.tp_degree),
        batch_size=int(decoder.batch_size),
        max_length=int(decoder.max_length),
        buckets=tuple(int(b) for b in decoder.buckets),
        auto_cast_type="fp32" if auto_cast == "none" else auto_cast_type,
    )


def load_compiled(model_dir: Path, decoder_dir: str, backend: str, tensor_parallel: int = 1) -> Any:
    """The compiled decoder of a neuron text-generation directory (neuron_emu.llm's NeuronDecoder). Above one
    NeuronCore its ranks run as worker processes joined by gloo all-reduces (as the encoders' tensor-parallel graphs
    do, container/handlers/neuron.py): the emulated NeuronLink is real inter-process collectives, not sums in one
    process."""
    if backend == "torch_neuronx":
        try:
            importlib.import_module("neuronx_distributed_inference")
        except ImportError:
            raise ManifestError(NXDI_MISSING) from None
        raise ManifestError(NXDI_NOT_SERVED)
    from neuron_emu.errors import NeuronEmuError
    from neuron_emu.llm.artifact import load

    try:
        return load(model_dir / decoder_dir, executor="processes" if tensor_parallel > 1 else "in_process")
    except NeuronEmuError as exc:
        raise ManifestError(f"the compiled decoder cannot be loaded: {' '.join(str(exc).split())}") from None
