"""Every failure neuron_emu reports to a user: each message is one readable line."""


class NeuronEmuError(Exception):
    """Base class of neuron_emu's user-facing errors."""


class CustomOpBuildError(NeuronEmuError):
    """Custom-op sources that cannot be built into a library (limits, compile or link errors)."""


class CustomOpLoadError(NeuronEmuError):
    """A custom-op library that cannot be loaded or registered."""


class CompilerArgsError(NeuronEmuError):
    """Compiler arguments neuron_emu cannot interpret."""


class TraceError(NeuronEmuError):
    """A model that cannot be traced for a NeuronCore (unsupported ops, outputs, limits)."""


class ArtifactError(NeuronEmuError):
    """A traced artifact that cannot be saved, loaded or run."""


class NeuronEmuWarning(UserWarning):
    """Something neuron_emu accepted but does not emulate (e.g. an unknown compiler flag)."""
