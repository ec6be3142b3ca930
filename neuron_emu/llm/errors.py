"""What neuron_emu.llm refuses, each in one line (all NeuronEmuErrors, and ValueErrors for callers that catch those).

ArtifactError (neuron_emu.errors) covers a saved decoder directory that cannot be written, read or trusted.
"""

from __future__ import annotations

from neuron_emu.errors import NeuronEmuError


class DecoderCompileError(NeuronEmuError, ValueError):
    """A decoder that cannot be compiled as asked: tensor-parallel degree, buckets, lengths, auto-cast, weights."""


class DecoderInputError(NeuronEmuError, ValueError):
    """A request the compiled decoder cannot run: a batch line, token id or position out of range."""


class ContextLengthError(DecoderInputError):
    """A prompt or a generation step past the length the decoder was compiled for (its max_length)."""
