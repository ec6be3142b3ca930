"""neuron_emu.trace: fixed shapes, auto-cast numerics, save/load, dynamic batching, buckets and analyze."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import neuron_emu
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.errors import ArtifactError, TraceError
from neuron_emu.rounding import round_to
from tests.neuron_emu.conftest import ClassifierWrapper, QAWrapper, run_python, tiny_bert_config


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        out: torch.Tensor = torch.ops.nemu_test.relu_forward(x)
        return out

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        out: torch.Tensor = torch.ops.nemu_test.relu_backward(grad, x)
        return out


class CustomMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.fc2(Relu.apply(self.fc1(x))), dim=1)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture
def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP().eval()


def test_auto_cast_none_equals_the_cpu_reference(mlp: MLP, bert_classifier: ClassifierWrapper) -> None:
    x = torch.randn(4, 12)
    traced = neuron_emu.trace(mlp, x, compiler_args="--auto-cast none")
    with torch.no_grad():
        assert torch.allclose(traced(x), mlp(x), atol=1e-5, rtol=0)
    ids = torch.randint(0, 1000, (2, 24))
    mask = torch.ones(2, 24, dtype=torch.long)
    traced_bert = neuron_emu.trace(bert_classifier, (ids, mask), compiler_args="--auto-cast none")
    with torch.no_grad():
        assert torch.allclose(traced_bert(ids, mask), bert_classifier(ids, mask), atol=1e-5, rtol=0)


def test_matmult_auto_cast_rounds_exactly_the_matmul_operands(mlp: MLP) -> None:
    x = torch.randn(4, 12)
    traced = neuron_emu.trace(mlp, x, compiler_args="--auto-cast matmult --auto-cast-type bf16")
    hidden = torch.relu(F.linear(round_to(x, "bf16"), round_to(mlp.fc1.weight, "bf16"), mlp.fc1.bias))
    expected = F.linear(round_to(hidden, "bf16"), round_to(mlp.fc2.weight, "bf16"), mlp.fc2.bias)
    assert torch.equal(traced(x), expected.detach())
    with torch.no_grad():
        assert not torch.equal(traced(x), mlp(x))


def test_all_auto_cast_keeps_every_intermediate_representable(mlp: MLP) -> None:
    x = torch.randn(4, 12)
    traced = neuron_emu.trace(mlp, x, compiler_args="--auto-cast all --auto-cast-type bf16")
    out = traced(x)
    assert torch.equal(round_to(out, "bf16"), out)
    matmult = neuron_emu.trace(mlp, x, compiler_args="--auto-cast matmult --auto-cast-type bf16")(x)
    assert not torch.equal(round_to(matmult, "bf16"), matmult)


def test_bert_classifier_error_grows_with_coarser_auto_cast(bert_classifier: ClassifierWrapper) -> None:
    ids = torch.randint(0, 1000, (2, 32))
    mask = torch.ones(2, 32, dtype=torch.long)
    mask[1, 20:] = 0
    with torch.no_grad():
        reference = bert_classifier(ids, mask)
    errors = {}
    for args in (
        "--auto-cast matmult --auto-cast-type fp16",
        "--auto-cast matmult --auto-cast-type bf16",
        "--auto-cast all --auto-cast-type bf16",
        "--auto-cast matmult --auto-cast-type fp8_e4m3",
    ):
        traced = neuron_emu.trace(bert_classifier, (ids, mask), compiler_args=args)
        errors[args] = (traced(ids, mask) - reference).abs().max().item()
    values = list(errors.values())
    assert 0 < values[0] < values[1] < values[2] < values[3], errors
    assert values[1] < 5e-3


@pytest.mark.slow
def test_bert_base_bf16_matmult_logits_within_a_few_thousandths() -> None:
    from transformers import BertForSequenceClassification

    torch.manual_seed(2)
    config = tiny_bert_config(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=512, num_labels=2,
    )  # fmt: skip
    model = ClassifierWrapper(BertForSequenceClassification(config)).eval()
    ids = torch.randint(0, 30522, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.long)
    with torch.no_grad():
        reference = model(ids, mask)
    traced = neuron_emu.trace(model, (ids, mask))  # compiler defaults: --auto-cast matmult --auto-cast-type bf16
    error = (traced(ids, mask) - reference).abs().max().item()
    assert 1e-5 < error < 5e-3


def test_shapes_and_dtypes_are_fixed(mlp: MLP) -> None:
    traced = neuron_emu.trace(mlp, torch.randn(4, 12))
    with pytest.raises(torch.jit.Error, match=r"input 0 has shape \[5, 12\] but the model was traced for \[4, 12\]"):
        traced(torch.randn(5, 12))
    with pytest.raises(
        torch.jit.Error,
        match=r"input 0 has dtype torch\.float64 but the model was traced with torch\.float32",
    ):
        traced(torch.randn(4, 12, dtype=torch.float64))


def test_dynamic_batch_splits_and_pads_any_batch(mlp: MLP) -> None:
    traced = neuron_emu.dynamic_batch(neuron_emu.trace(mlp, torch.randn(2, 12), compiler_args="--auto-cast none"))
    for batch in (1, 2, 3, 7):
        x = torch.randn(batch, 12)
        with torch.no_grad():
            assert torch.allclose(traced(x), mlp(x), atol=1e-6)
    with pytest.raises(torch.jit.Error, match="dynamic batching only varies dim 0"):
        traced(torch.randn(3, 11))


def test_dynamic_batch_needs_a_batch_dimension() -> None:
    traced = neuron_emu.trace(lambda x: x.sum(), torch.randn(3, 4))
    with pytest.raises(ArtifactError, match="share dim 0"):
        neuron_emu.dynamic_batch(traced)


def test_weights_are_copied_at_trace_time(mlp: MLP) -> None:
    x = torch.randn(4, 12)
    traced = neuron_emu.trace(mlp, x, compiler_args="--auto-cast none")
    before = traced(x)
    with torch.no_grad():
        mlp.fc1.weight.add_(1.0)
    assert torch.equal(traced(x), before)


def test_save_and_load_with_custom_ops_in_a_new_process(test_ops: LoadedLibrary, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = CustomMLP().eval()
    x = torch.randn(5, 12)
    traced = neuron_emu.trace(model, x)
    assert "nemu_test::relu_forward" in str(traced.neuron.compiled.graph)
    path = tmp_path / "model.pt"
    torch.jit.save(traced, str(path))
    torch.save(x, tmp_path / "x.pt")
    expected = traced(x)
    out = run_python(
        f"""
        import torch, json
        from neuron_emu import custom_op
        custom_op.load_library({str(test_ops.path)!r})
        model = torch.jit.load({str(path)!r})
        x = torch.load({str(tmp_path / "x.pt")!r})
        print(json.dumps(model(x).tolist()))
        """
    )
    assert torch.equal(torch.tensor(json.loads(out)), expected)


def test_runtime_load_explains_missing_custom_op_libraries(test_ops: LoadedLibrary, tmp_path: Path) -> None:
    torch.manual_seed(0)
    traced = neuron_emu.trace(CustomMLP().eval(), torch.randn(2, 12))
    path = tmp_path / "model.pt"
    torch.jit.save(traced, str(path))
    out = run_python(
        f"""
        import neuron_emu
        from neuron_emu.errors import ArtifactError
        try:
            neuron_emu.load({str(path)!r})
        except ArtifactError as exc:
            print(exc)
        """
    )
    assert "calls custom ops of nemu_test; load the lib<name>.so that defines them first" in out
    assert neuron_emu.describe(neuron_emu.load(path, [test_ops.path]))["custom_op_namespaces"] == ["nemu_test"]


def test_one_custom_op_library_per_model(test_ops: LoadedLibrary, multicore_ops: LoadedLibrary) -> None:
    def both(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.nemu_multicore.relu(torch.ops.nemu_test.tcm_negate(x))

    with pytest.raises(TraceError, match=r"2 custom-op libraries .* a Neuron model may use one"):
        neuron_emu.trace(both, torch.randn(16))


def test_bucketed_bert_pads_to_the_next_bucket(tiny_qa: QAWrapper) -> None:
    def example(length: int) -> tuple[torch.Tensor, ...]:
        return (torch.ones(1, length, dtype=torch.long),) * 2 + (torch.zeros(1, length, dtype=torch.long),)

    traced = neuron_emu.trace_buckets(
        tiny_qa,
        [example(32), example(16)],
        pad_values=[0, 0, 0],
        output_seq_dims=[1, 1],
        compiler_args="--auto-cast none",
    )
    neuron_emu.dynamic_batch(traced)
    assert neuron_emu.describe(traced)["buckets"] == [16, 32]
    for batch, length in ((1, 16), (3, 11), (2, 27)):
        ids = torch.randint(0, 1000, (batch, length))
        mask = torch.ones(batch, length, dtype=torch.long)
        types = torch.zeros(batch, length, dtype=torch.long)
        start, end = traced(ids, mask, types)
        with torch.no_grad():
            ref_start, ref_end = tiny_qa(ids, mask, types)
        assert start.shape == (batch, length)
        assert torch.allclose(start, ref_start, atol=1e-5) and torch.allclose(end, ref_end, atol=1e-5)
    too_long = torch.ones(1, 40, dtype=torch.long)
    with pytest.raises(torch.jit.Error, match="sequence length 40 exceeds the largest bucket 32"):
        traced(too_long, too_long, too_long)


def test_analyze_lists_supported_and_unsupported_ops(mlp: MLP) -> None:
    report = neuron_emu.analyze(mlp, torch.randn(2, 12))
    assert report["supported_operators"] == {"aten::linear": 2, "aten::relu": 1}
    assert report["support_percentage"] == "100.00%"
    assert report["unsupported_operators"] == []

    def picky(x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(torch.relu(x))

    report = neuron_emu.analyze(picky, torch.randn(8))
    assert report["supported_operators"] == {"aten::relu": 1}
    assert report["support_percentage"] == "50.00%"
    [unsupported] = report["unsupported_operators"]
    assert unsupported["kind"] == "aten::nonzero"
    assert "depends on the data" in unsupported["reason"]
    assert "test_tracing.py" in unsupported["call"]
    with pytest.raises(TraceError, match=r"NeuronCores cannot run aten::nonzero at .*test_tracing\.py"):
        neuron_emu.trace(picky, torch.randn(8))


def test_trace_errors_are_one_line(mlp: MLP) -> None:
    mlp.train()
    with pytest.raises(TraceError, match=r"call model.eval\(\) before tracing"):
        neuron_emu.trace(mlp, torch.randn(2, 12))
    with pytest.raises(TraceError, match="returned dict"):
        neuron_emu.trace(lambda x: {"y": x}, torch.randn(2))
    with pytest.raises(TraceError, match="tracing the model failed: RuntimeError: mat1 and mat2 shapes cannot"):
        neuron_emu.trace(mlp.eval(), torch.randn(2, 5))
    with pytest.raises(TraceError, match="example_inputs must be a Tensor"):
        neuron_emu.trace(mlp, [1, 2])


def test_compiler_workdir_holds_the_graph_and_cost_plan(mlp: MLP, tmp_path: Path) -> None:
    neuron_emu.trace(mlp, torch.randn(2, 12), compiler_workdir=tmp_path)
    plan = json.loads((tmp_path / "cost_plan.json").read_text())
    assert plan["estimate"] is True
    assert "aten::linear" in (tmp_path / "graph.txt").read_text()
    assert "ESTIMATE" in (tmp_path / "cost_plan.txt").read_text()
    assert "--auto-cast matmult --auto-cast-type bf16" in (tmp_path / "log-neuron-cc.txt").read_text()
