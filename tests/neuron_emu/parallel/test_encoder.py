"""Finding the one BERT-family encoder in a model's module tree, wherever a wrapper keeps it, and what is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from neuron_emu import parallel
from neuron_emu.errors import TraceError
from neuron_emu.parallel.encoder import encoder_parts
from neuron_emu.parallel.group import ForkServer
from neuron_emu.parallel.module import ParallelModel
from tests.neuron_emu.conftest import QAWrapper, tiny_bert_config
from tests.neuron_emu.parallel.conftest import SMALL, Inputs, autocast_tolerance, make_inputs

NO_CAST_TOLERANCE = 1e-4


def _refused(call: Callable[[], Any], pattern: str) -> str:
    with pytest.raises(TraceError, match=pattern) as failure:
        call()
    message = str(failure.value)
    assert "\n" not in message
    return message


def _bert(**overrides: Any) -> Any:
    from transformers import BertModel

    torch.manual_seed(0)
    return BertModel(tiny_bert_config(**SMALL, **overrides)).eval()


class Reader(torch.nn.Module):
    """A QA wrapper keeping the Hugging Face model under another name than `.model`, one level further down."""

    def __init__(self, qa: torch.nn.Module) -> None:
        super().__init__()
        self.stages = torch.nn.ModuleDict({"reader": qa})

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.stages["reader"](input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.start_logits, out.end_logits


def test_a_qa_model_kept_under_any_name_shards_like_the_qa_wrapper(
    tiny_qa: QAWrapper,
    qa_inputs: Inputs,
    sharded: Callable[[int], ParallelModel],
    single_core: torch.jit.ScriptModule,
) -> None:
    reader = Reader(tiny_qa.model).eval()
    parts = encoder_parts(reader)
    assert (parts.path, parts.layout, parts.model_type) == ("stages.reader.bert", "bert", "bert")
    with parallel.trace(reader, qa_inputs, tp_degree=2) as model:
        got = model(*qa_inputs)
        assert model.manifest.model["encoder_path"] == "stages.reader.bert"
        assert model.manifest.model["uses_token_types"] is True
    expected = sharded(2)(*qa_inputs)
    with torch.no_grad():
        cpu = tiny_qa(*qa_inputs)
    for g, e, ref, fp32 in zip(got, expected, single_core(*qa_inputs), cpu, strict=True):
        assert g.shape == e.shape == (2, 16)
        assert float((g - e).abs().max()) <= autocast_tolerance(ref, fp32)


class MyModule(torch.nn.Module):
    """Embeddings and a linear head, but no encoder."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 32)
        self.out = torch.nn.Linear(32, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.out(self.embed(ids))
        return logits


class TwoEncoders(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query_tower = _bert()
        self.document_tower = _bert()

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        query = self.query_tower(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]
        document = self.document_tower(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]
        return (query * document).sum(-1)


def test_no_encoder_or_several_are_refused_saying_what_was_found(qa_inputs: Inputs) -> None:
    torch.manual_seed(0)
    _refused(
        lambda: parallel.trace(MyModule().eval(), qa_inputs, tp_degree=2), "found no BERT-family encoder in MyModule"
    )
    message = _refused(
        lambda: parallel.trace(TwoEncoders().eval(), qa_inputs, tp_degree=2),
        "found 2 BERT-family encoders in TwoEncoders",
    )
    assert "BertModel at 'query_tower'" in message and "BertModel at 'document_tower'" in message


def test_decoders_are_refused(qa_inputs: Inputs) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0))
    ids, mask, _ = qa_inputs
    _refused(
        lambda: parallel.trace(gpt2.eval(), (ids, mask), tp_degree=2), "found no BERT-family encoder in GPT2LMHeadModel"
    )
    decoder = _bert(is_decoder=True)
    _refused(lambda: parallel.trace(decoder, qa_inputs, tp_degree=2), "configured as a decoder")


def test_layouts_it_cannot_shard_are_refused(qa_inputs: Inputs) -> None:
    from transformers import DebertaV2Config, DebertaV2Model

    relative = _bert()  # seeded, as is what follows
    relative.config.position_embedding_type = "relative_key"
    _refused(lambda: parallel.trace(relative, qa_inputs, tp_degree=2), "position_embedding_type 'relative_key'")
    sizes: dict[str, Any] = {"vocab_size": 1000, "num_hidden_layers": 2, "num_attention_heads": 4, **SMALL}
    deberta = DebertaV2Model(DebertaV2Config(**sizes)).eval()
    _refused(
        lambda: parallel.trace(deberta, qa_inputs, tp_degree=2),
        r"encoder\.layer\[0\]\.attention\.self\.query is not a torch\.nn\.Linear",
    )


def test_a_degree_that_does_not_divide_the_heads_of_any_model_is_refused(qa_inputs: Inputs) -> None:
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    classifier = BertForSequenceClassification(tiny_bert_config(num_labels=3, **SMALL)).eval()
    message = _refused(
        lambda: parallel.trace(classifier, qa_inputs, tp_degree=3), "tp_degree 3 does not divide the model's 4"
    )
    assert "1, 2, 4" in message


class Twice(torch.nn.Module):
    """Runs its encoder twice per call (the head could not be told from the encoder)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = _bert()

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        first = self.encoder(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        second = self.encoder(input_ids=ids.flip(-1), attention_mask=mask, token_type_ids=types).last_hidden_state
        return first + second


class Aliased(torch.nn.Module):
    """Registers its encoder but calls it through a plain list, out of the module tree's sight."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = _bert()
        self.handles = [self.encoder]

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.handles[0](input_ids=ids, attention_mask=mask).last_hidden_state
        return hidden


def test_a_forward_that_does_not_run_its_encoder_once_through_the_module_tree_is_refused(qa_inputs: Inputs) -> None:
    _refused(lambda: parallel.trace(Twice().eval(), qa_inputs, tp_degree=2), "runs its encoder at 'encoder' 2 times")
    _refused(
        lambda: parallel.trace(Aliased().eval(), qa_inputs, tp_degree=2),
        "did not reach its encoder at 'encoder' through its module tree",
    )


class Passes(torch.nn.Module):
    """A classifier wrapper that hands token_type_ids on to its encoder, or drops them (as RoBERTa-style QA
    wrappers do); `declare` sets a `uses_token_types` attribute (which trace honours) instead of letting trace
    find out."""

    def __init__(self, passes: bool, declare: bool | None = None) -> None:
        super().__init__()
        self.body = _bert()
        self.head = torch.nn.Linear(32, 2)
        self.passes = passes
        if declare is not None:
            self.uses_token_types = declare

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        out = self.body(input_ids=ids, attention_mask=mask, token_type_ids=types if self.passes else None)
        logits: torch.Tensor = self.head(out.pooler_output)
        return logits


@pytest.mark.parametrize("passes", [True, False])
def test_whether_token_types_reach_the_encoder_is_found_by_comparing_outputs(
    passes: bool, fork_server: ForkServer
) -> None:
    model = Passes(passes).eval()
    ids, mask, _ = make_inputs(2, 16, seed=9)
    # All-zero token types in the example (as Sagebox's compile uses) cannot tell; trace probes with a pair.
    inputs = (ids, mask, torch.zeros_like(ids))
    probe = make_inputs(2, 16, seed=9)
    with parallel.trace(model, inputs, tp_degree=2, compiler_args="--auto-cast none") as sharded:
        assert sharded.manifest.model["uses_token_types"] is passes
        got = sharded(*probe)
    with torch.no_grad():
        expected = model(*probe)
    assert float((got - expected).abs().max()) <= NO_CAST_TOLERANCE


def test_a_declared_uses_token_types_is_honoured(qa_inputs: Inputs) -> None:
    assert encoder_parts(Passes(True, declare=False).eval()).uses_token_types is False
    assert encoder_parts(Passes(False, declare=True).eval()).token_types_declared
    # Declaring what the forward does not do makes the sharded model disagree, which is refused.
    _refused(
        lambda: parallel.trace(Passes(False, declare=True).eval(), qa_inputs, tp_degree=1), "disagrees with the model"
    )
