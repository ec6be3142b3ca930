"""`sagebox compile --tensor-parallel N`: a tiny BERT sharded over 2 emulated NeuronCores, served in-process and by a
real serving process (`python -m container serve`, what the box runs), answering like the single-core compile, and
leaving no worker process behind; its manifest passes synth only for a target with the same degree."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from container.handlers import RuntimeOptions, handler_for
from container.handlers.neuron import NeuronHandler
from container.manifest import load_verified
from container.predictor import Predictor
from infra.errors import TargetError
from infra.plan import plan_endpoint
from infra.settings import AppSettings
from infra.targets import parse_targets
from sagebox.cli.app import main
from sagebox.errors import SageboxError
from sagebox.local_server import LocalServer
from sagebox.pipeline.compile.neuron import (
    NEURONX_TENSOR_PARALLEL,
    PARALLEL_PLAN_FILE,
    PARALLEL_PLAN_TEXT,
    build_neuron,
    example_inputs,
)
from sagebox.pipeline.load.hf_model import load_qa_module
from sagebox.pipeline.package.tarball import package_model_dir
from tests.conftest import minilm_tokenizer_path

EXIT_DEADLINE_S = 60.0  # how long exited processes may take to be reaped on a loaded machine (not a speed claim)
PAIRS = [
    ("Who met Bob?", "Alice met Bob in Paris."),
    ("Which basin?", "The Amazon rainforest covers most of the Amazon basin of South America."),
]


def bert_folder(path: Path, **dims: Any) -> Path:
    """A Hugging Face QA folder with random weights (seeded) and the MiniLM tokenizer."""
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, **dims)
    BertForQuestionAnswering(config).eval().save_pretrained(str(path))
    shutil.copyfile(minilm_tokenizer_path(), path / "tokenizer.json")
    return path


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 128 positions: the Neuron buckets 64 and 128 only, so the test compiles two buckets per degree.
    dims = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    return bert_folder(tmp_path_factory.mktemp("hf") / "tiny-bert-128", max_position_embeddings=128, **dims)


@pytest.fixture(scope="module")
def single_core_dir(hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled") / "tp1"
    build_neuron(hf_folder, out)
    return out


@pytest.fixture(scope="module")
def tp2_compiled(hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`sagebox compile --tensor-parallel 2`: the model directory and what the command printed."""
    out = tmp_path_factory.mktemp("compiled") / "tp2"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["compile", "--model", str(hf_folder), "--out", str(out), "--tensor-parallel", "2"]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def tp2_dir(tp2_compiled: tuple[Path, str]) -> Path:
    return tp2_compiled[0]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _still_alive(pids: Iterable[int]) -> list[int]:
    deadline = time.monotonic() + EXIT_DEADLINE_S
    left = [pid for pid in pids if _alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if _alive(pid)]
    return left


def _descendants(root: int) -> dict[int, bytes]:
    """Every live process below `root`, with its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: dict[int, bytes] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found and _alive(pid):
                try:
                    found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                frontier.append(pid)
    return found


@pytest.mark.slow  # ~30 s here: two compiles of two buckets, and a serving process that starts 4 workers
def test_compile_serve_and_stop(
    hf_folder: Path, single_core_dir: Path, tp2_compiled: tuple[Path, str], tmp_path: Path
) -> None:
    tp2_dir, printed = tp2_compiled
    assert "tensor parallel 2" in printed and PARALLEL_PLAN_TEXT in printed and "estimate" in printed

    # The manifest records the degree and the heads; every bucket is its own neuron_emu.parallel directory.
    manifest = load_verified(tp2_dir)
    assert manifest.compile is not None and manifest.sequence_buckets == [64, 128]
    assert (manifest.compile.tensor_parallel, manifest.compile.num_attention_heads) == (2, 2)
    assert manifest.compile.backend == "neuron_emu" and manifest.compile.custom_op_libraries == []
    assert manifest.model_file == "tp/seq64/parallel.json"
    for bucket in (64, 128):
        saved = json.loads((tp2_dir / f"tp/seq{bucket}/parallel.json").read_text())
        assert (saved["tp_degree"], saved["input_shapes"], saved["dynamic_batch"]) == (2, [[1, bucket]] * 3, True)
    single = load_verified(single_core_dir)
    assert single.compile is not None
    assert (single.compile.tensor_parallel, single.compile.num_attention_heads) == (1, 2)
    assert single.compile.auto_cast == manifest.compile.auto_cast == "matmult"  # the same compiler arguments

    # The plans: per bucket, per instance type, the degrees that fit and the fastest (estimates).
    document = json.loads((tp2_dir / PARALLEL_PLAN_FILE).read_text())
    assert (
        document["estimate"] is True
        and document["tensor_parallel"] == 2
        and sorted(document["buckets"])
        == [
            "128",
            "64",
        ]
    )
    inf2 = next(i for i in document["buckets"]["64"]["instances"] if i["instance_type"] == "ml.inf2.xlarge")
    assert inf2["fitting_degrees"] == [1, 2] and inf2["fastest_degree"] in (1, 2)
    two = next(d for d in inf2["degrees"] if d["degree"] == 2)
    assert two["collective_us"] > 0 and two["link"] == "intra-chip"

    # In-process: the handler's logits equal the single-core compile's within the auto-cast tolerance.
    module = load_qa_module(hf_folder)
    sharded, one_core = handler_for("neuron"), handler_for("neuron")
    sharded.load(tp2_dir, manifest, RuntimeOptions(threads=2))
    one_core.load(single_core_dir, single, RuntimeOptions(threads=2))
    try:
        assert isinstance(sharded, NeuronHandler) and len(sharded.worker_pids) == 4  # 2 ranks x 2 buckets
        for bucket in (64, 128):
            ids, mask, types = example_inputs(3, bucket)
            ids = torch.randint(1000, 2000, ids.shape, generator=torch.Generator().manual_seed(bucket))
            mask[0, bucket // 2 :] = 0
            inputs = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
            with torch.no_grad():
                fp32 = module(ids, mask, types)
            for got, want, cpu in zip(sharded.predict(inputs), one_core.predict(inputs), fp32, strict=True):
                cast_error = float(np.abs(want - cpu.numpy()).max())
                bound = 2 * cast_error + 1e-5 * max(1.0, float(cpu.abs().max()))
                assert float(np.abs(got - want).max()) <= bound
        in_process = sharded.worker_pids
    finally:
        sharded.close()  # type: ignore[attr-defined]
    assert _still_alive(in_process) == []
    predictor = Predictor.load(tp2_dir)
    try:
        answers = predictor.answer_many(PAIRS)
        for a, b in zip(answers, Predictor.load(single_core_dir).answer_many(PAIRS), strict=True):
            assert (a.text, a.start) == (b.text, b.start) and a.score == pytest.approx(b.score, abs=1e-3)
    finally:
        predictor.handler.close()  # type: ignore[attr-defined]

    # A real serving process (what `sagebox up` and the box start): answers, then leaves no worker behind.
    with LocalServer.start(tp2_dir, tmp_path / "server.log") as server:
        workers = {pid for pid, cmd in _descendants(server.process.pid).items() if b"neuron_emu.parallel" in cmd}
        assert len(workers) >= 4  # the fork server and 2 ranks per bucket
        body = json.dumps({"question": PAIRS[0][0], "context": PAIRS[0][1]}).encode()
        request = urllib.request.Request(
            f"{server.url}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            served = json.loads(response.read())
        assert served["answer"] == answers[0].text
    assert server.process.returncode == 0
    assert _still_alive(workers) == []


@pytest.mark.slow  # packs the compiled model (~10 MB) into a model.tar.gz
def test_synth_accepts_the_compiled_degree_only(tp2_dir: Path, tmp_path: Path) -> None:
    tarball = package_model_dir(tp2_dir, tmp_path / "models" / "tp2" / "model.tar.gz").path
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    settings = AppSettings(model_dir=tmp_path / "models", build_context=tmp_path, allow_emulated=True)
    fields = {"name": "inf2-tp2", "instance_type": "ml.inf2.xlarge", "model_data": str(tarball)}
    plan = plan_endpoint(parse_targets({"targets": [{**fields, "tensor_parallel": 2}]})[0], settings)
    assert plan.tensor_parallel == 2 and plan.environment["SAGEMAKER_MODEL_SERVER_WORKERS"] == "1"
    with pytest.raises(TargetError, match="was compiled for tensor_parallel 2"):
        plan_endpoint(parse_targets({"targets": [fields]})[0], settings)


def test_refusals_are_one_line(hf_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with pytest.raises(SageboxError) as caught:
        build_neuron(hf_folder, out, tensor_parallel=3)
    assert str(caught.value) == (
        "Neuron compilation with --tensor-parallel 3 failed: tp_degree 3 does not divide the model's 2 attention "
        "heads (choose one of 1, 2)"
    )
    with pytest.raises(SageboxError) as caught:
        build_neuron(hf_folder, out, tensor_parallel=2, backend="torch_neuronx")
    assert str(caught.value) == NEURONX_TENSOR_PARALLEL  # refused before torch-neuronx is looked for
    # 32 heads of width 1 allow degree 32, more than the 24 NeuronCores of the largest inf2 instance.
    wide = bert_folder(
        tmp_path / "wide",
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=32,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    args = "--auto-cast matmult --auto-cast-type bf16 --target inf2"
    with pytest.raises(SageboxError) as caught:
        build_neuron(wide, out, tensor_parallel=32, compiler_args=args)
    assert str(caught.value) == (
        "Neuron compilation with --tensor-parallel 32 failed: tp_degree 32 exceeds the 24 NeuronCores of "
        "ml.inf2.48xlarge, the largest inf2 instance"
    )
    assert not out.exists()
    code = main(["compile", "--model", str(hf_folder), "--out", str(out), "--tensor-parallel", "0"])
    assert code == 1 and capsys.readouterr().err == "sagebox: error: --tensor-parallel must be at least 1\n"
