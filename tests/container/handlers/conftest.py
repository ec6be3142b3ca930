"""The neuron handler's tests reuse neuron_emu's fixtures (test custom-op library, tiny BERT QA)."""

from tests.neuron_emu.conftest import test_ops, tiny_qa

__all__ = ["test_ops", "tiny_qa"]
