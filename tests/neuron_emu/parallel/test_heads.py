"""Models with other heads than QA, sharded: their outputs against the single-core traced model and the CPU model.

The head (pooler, classifier, a wrapper's pooling and normalisation) is the model's own forward run by the last
segment with the encoder stubbed, so whatever it computes must come out as the single-core trace computes it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import neuron_emu
from neuron_emu import parallel
from neuron_emu.parallel.encoder import encoder_parts
from neuron_emu.parallel.group import ForkServer
from neuron_emu.parallel.head import flatten_outputs
from neuron_emu.parallel.shard import rank_segments, run_in_process
from tests.neuron_emu.conftest import QAWrapper, SentenceEmbedder, tiny_bert_config
from tests.neuron_emu.parallel.conftest import (
    HEAD_CASES,
    SMALL,
    HeadCase,
    autocast_tolerance,
    head_case,
    make_inputs,
    outputs_of,
)

# The brief's bound for `--auto-cast none`: the sharded model equals the CPU model up to fp32 summation order.
NO_CAST_TOLERANCE = 1e-4


@pytest.fixture(scope="module", params=HEAD_CASES)
def case(request: pytest.FixtureRequest) -> HeadCase:
    return head_case(str(request.param))


@pytest.fixture(scope="module")
def single_core_outputs(case: HeadCase) -> Iterator[torch.Tensor | tuple[torch.Tensor, ...]]:
    """What the single-core neuron_emu.trace of the case's model returns on its inputs (default compiler args)."""
    yield neuron_emu.trace(case.model, case.inputs)(*case.inputs)


def _cpu(case: HeadCase) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return flatten_outputs(case.model(*case.inputs))[1]


@pytest.mark.parametrize("degree", [1, 2, 4])
def test_sharded_models_with_other_heads_equal_single_core_within_autocast_tolerance(
    case: HeadCase,
    single_core_outputs: torch.Tensor | tuple[torch.Tensor, ...],
    fork_server: ForkServer,
    degree: int,
) -> None:
    with parallel.trace(case.model, case.inputs, tp_degree=degree) as model:
        got = model(*case.inputs)
        assert len(model.worker_pids) == degree
    # The same structure neuron_emu.trace returns: a Tensor for a model returning one, else a tuple.
    assert type(got) is type(single_core_outputs)
    for g, ref, fp32 in zip(outputs_of(got), outputs_of(single_core_outputs), _cpu(case), strict=True):
        assert g.shape == ref.shape == fp32.shape
        assert float((g - ref).abs().max()) <= autocast_tolerance(ref, fp32)


@pytest.mark.slow
@pytest.mark.parametrize("degree", [2, 4])
def test_without_auto_cast_models_with_other_heads_equal_the_cpu_model(
    case: HeadCase, fork_server: ForkServer, degree: int
) -> None:
    with parallel.trace(case.model, case.inputs, tp_degree=degree, compiler_args="--auto-cast none") as model:
        got = outputs_of(model(*case.inputs))
    for g, e in zip(got, _cpu(case), strict=True):
        assert float((g - e).abs().max()) <= NO_CAST_TOLERANCE


def test_each_case_has_the_head_it_claims() -> None:
    """What the acceptance cases exercise: output shapes per head, padding in the mask, the encoder found."""
    shapes = {}
    for name in HEAD_CASES:
        case = head_case(name)
        assert int(case.inputs[1][-1].sum()) < case.inputs[1].shape[1]  # the last row is padded
        shapes[name] = [tuple(t.shape) for t in _cpu(case)]
        assert encoder_parts(case.model).hidden == 32
    assert shapes == {
        "bert-sequence-classification": [(2, 3)],
        "sentence-embedding": [(2, 32)],
        "distilbert-token-classification": [(2, 16, 2)],
        "roberta-sequence-classification": [(2, 2)],
    }
    embedding = head_case("sentence-embedding")
    assert encoder_parts(embedding.model).path == "backbone"
    norms = (_cpu(embedding)[0] ** 2).sum(-1)
    torch.testing.assert_close(norms, torch.ones(2))


class ClsHead(torch.nn.Module):
    """A wrapper with its own head: a Linear on the CLS token of an encoder kept two levels down."""

    def __init__(self) -> None:
        from transformers import BertModel

        super().__init__()
        self.towers = torch.nn.ModuleDict({"text": torch.nn.Sequential(BertModel(tiny_bert_config(**SMALL)))})
        self.score = torch.nn.Linear(32, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        encoder = self.towers.get_submodule("text.0")
        hidden = encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=types).last_hidden_state
        score: torch.Tensor = self.score(hidden[:, 0]).squeeze(-1)
        return score


def _eager_equal(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], degree: int) -> None:
    parts = encoder_parts(model)
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))[1]
        got = run_in_process([rank_segments(parts, degree, rank) for rank in range(degree)], inputs)
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("degree", [1, 2, 4])
def test_eager_shards_of_any_head_sum_to_the_cpu_model(degree: int) -> None:
    """Before any tracing, on models whose outputs neuron_emu.trace does not take (ModelOutputs) too."""
    from transformers import BertModel, DistilBertConfig, DistilBertForQuestionAnswering

    torch.manual_seed(2)
    inputs = make_inputs(2, 16, seed=3)
    for name in HEAD_CASES:
        case = head_case(name, return_dict=True)
        _eager_equal(case.model, case.inputs, degree)
    _eager_equal(ClsHead().eval(), inputs, degree)
    # A bare base model: (last_hidden_state, pooler_output).
    base = BertModel(tiny_bert_config(**SMALL)).eval()
    assert encoder_parts(base).path == ""
    _eager_equal(base, inputs, degree)
    # DistilBERT inside a wrapper that passes token_type_ids along (swallowed by the model's **kwargs).
    distil = DistilBertForQuestionAnswering(DistilBertConfig(vocab_size=1000, dim=32, n_layers=2, n_heads=4))
    _eager_equal(QAWrapper(distil).eval(), inputs, degree)


def test_a_wrapper_changing_what_the_model_returns_is_traced_with_it(fork_server: ForkServer) -> None:
    """Whatever the forward does after the encoder is the head: a wrapper scaling logits keeps its scaling."""
    from transformers import BertModel

    torch.manual_seed(4)
    model = SentenceEmbedder(BertModel(tiny_bert_config(**SMALL))).eval()

    class Scaled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            embedding = self.inner(*inputs)
            return embedding * 3.0, inputs[1].sum(-1)

    scaled = Scaled(model).eval()
    inputs = make_inputs(2, 16, seed=5)
    with parallel.trace(scaled, inputs, tp_degree=2, compiler_args="--auto-cast none") as sharded:
        got = sharded(*inputs)
    with torch.no_grad():
        expected = scaled(*inputs)
    assert isinstance(got, tuple) and len(got) == 2
    assert float((got[0] - expected[0]).abs().max()) <= NO_CAST_TOLERANCE
    assert torch.equal(got[1], expected[1])
