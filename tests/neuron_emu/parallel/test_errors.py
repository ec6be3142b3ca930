"""What `neuron_emu.parallel.trace` refuses, each in one line, before any tracing starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from neuron_emu import parallel
from neuron_emu.errors import TraceError
from tests.neuron_emu.conftest import QAWrapper, tiny_bert_config
from tests.neuron_emu.parallel.conftest import Inputs


def _refused(call: Callable[[], Any], pattern: str) -> str:
    with pytest.raises(TraceError, match=pattern) as failure:
        call()
    message = str(failure.value)
    assert "\n" not in message
    return message


def _qa(**overrides: int) -> QAWrapper:
    from transformers import BertForQuestionAnswering

    torch.manual_seed(0)
    return QAWrapper(BertForQuestionAnswering(tiny_bert_config(**overrides))).eval()


def test_a_degree_that_does_not_divide_the_heads_is_refused(tiny_qa: QAWrapper, qa_inputs: Inputs) -> None:
    message = _refused(
        lambda: parallel.trace(tiny_qa, qa_inputs, tp_degree=3), "tp_degree 3 does not divide the model's 4"
    )
    assert "1, 2, 4" in message
    _refused(lambda: parallel.trace(tiny_qa, qa_inputs, tp_degree=0), "positive integer")


def test_a_degree_that_does_not_divide_the_feed_forward_is_refused(qa_inputs: Inputs) -> None:
    model = _qa(intermediate_size=130)
    _refused(lambda: parallel.trace(model, qa_inputs, tp_degree=4), "does not divide the feed-forward size 130")


def test_a_degree_beyond_the_instance_cores_is_refused(tiny_qa: QAWrapper, qa_inputs: Inputs) -> None:
    _refused(
        lambda: parallel.trace(tiny_qa, qa_inputs, tp_degree=4, instance_type="ml.inf2.xlarge"),
        "tp_degree 4 exceeds the 2 NeuronCores of ml.inf2.xlarge",
    )
    _refused(
        lambda: parallel.trace(tiny_qa, qa_inputs, tp_degree=2, instance_type="ml.p4d.24xlarge"),
        "unknown instance type 'ml.p4d.24xlarge'",
    )


def test_without_an_instance_the_largest_one_of_the_target_bounds_the_degree(qa_inputs: Inputs) -> None:
    many_heads = _qa(num_attention_heads=64)  # head size 1: every degree up to 64 divides it
    _refused(
        lambda: parallel.trace(many_heads, qa_inputs, tp_degree=64),
        "tp_degree 64 exceeds the 32 NeuronCores of ml.trn1.32xlarge, the largest Neuron instance",
    )
    _refused(
        lambda: parallel.trace(many_heads, qa_inputs, tp_degree=32, compiler_args="--target inf2"),
        "tp_degree 32 exceeds the 24 NeuronCores of ml.inf2.48xlarge, the largest inf2 instance",
    )


def test_models_and_inputs_it_cannot_shard_are_refused(tiny_qa: QAWrapper, qa_inputs: Inputs) -> None:
    _refused(
        lambda: parallel.trace(torch.nn.Linear(4, 2).eval(), qa_inputs, tp_degree=2),
        "found no BERT-family encoder in Linear",
    )
    tiny_qa.train()
    try:
        _refused(lambda: parallel.trace(tiny_qa, qa_inputs, tp_degree=2), r"call model\.eval\(\)")
    finally:
        tiny_qa.eval()
    _refused(
        lambda: parallel.trace(tiny_qa, qa_inputs[:1], tp_degree=2),
        r"\(input_ids, attention_mask\) or \(input_ids, attention_mask, token_type_ids\)",
    )
    # Two inputs are (input_ids, attention_mask); this wrapper's forward needs three, so its own forward fails.
    _refused(
        lambda: parallel.trace(tiny_qa, qa_inputs[:2], tp_degree=2),
        "the model's own forward failed on the example inputs: TypeError",
    )
    ids, mask, types = qa_inputs
    _refused(lambda: parallel.trace(tiny_qa, (ids, mask, types[:, :8]), tp_degree=2), "differ in shape")


def test_a_model_whose_forward_is_not_the_standard_one_is_refused(tiny_qa: QAWrapper, qa_inputs: Inputs) -> None:
    class Reversed(torch.nn.Module):
        """Feeds its encoder the tokens in reverse order: segment 0 embeds the inputs as given, so the sharded
        model computes something else (what the model does after the encoder is traced as its head)."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            ids, mask, types = inputs
            out = self.model(input_ids=ids.flip(-1), attention_mask=mask, token_type_ids=types)
            return out.start_logits, out.end_logits

    reversed_ids = Reversed(tiny_qa.model).eval()
    _refused(lambda: parallel.trace(reversed_ids, qa_inputs, tp_degree=2), "disagrees with the model")
