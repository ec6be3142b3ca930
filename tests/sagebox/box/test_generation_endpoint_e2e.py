"""A decoder LLM through the box as a user deploys one: `build_all --task text-generation` on a tiny Llama folder,
packaged, deployed with plain boto3 (CreateModel, CreateEndpointConfig with the LLM guides' timeouts and volume,
CreateEndpoint) and invoked through boto3's sagemaker-runtime: InvokeEndpoint answers transformers' greedy text,
InvokeEndpointWithResponseStream sends the same text in many PayloadParts, and the Messages API's chunks validate as
the openai package's types. The same model compiled for NeuronCores (`sagebox compile --model-dir`, FP32) on an
ml.inf2.xlarge endpoint, configured with TGI's Neuron variables, streams the CPU endpoint's tokens; variables that
contradict its compiled shapes fail the endpoint with the server's one line as its FailureReason."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from sagebox.pipeline.build_all import build_all
from tests.causal_models import causal_folder
from tests.conftest import EmbeddedAws
from tests.sagebox.box.test_embedded_aws import ROLE, upload

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:llm"
NAME = "tiny-llama-llm"
INF2_NAME = "tiny-llama-inf2"
PROMPT = "the cat sat on"
LIMITS = {
    "ContainerStartupHealthCheckTimeoutInSeconds": 600,
    "ModelDataDownloadTimeoutInSeconds": 600,
    "VolumeSizeInGB": 30,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the tiny Llama folder, its FP32 text-generation directory)."""
    root = tmp_path_factory.mktemp("llm")
    folder = causal_folder(root / "folder", "llama")
    artifacts = build_all(folder, None, root / "work", root / "out", task="text-generation", neuron=False)
    return folder, artifacts.model_dirs["fp32"]


def _deploy(
    box: EmbeddedAws, name: str, data: str, instance: str, environment: dict[str, str], wait: bool = True
) -> None:
    sagemaker = box.client("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": data, "Environment": environment},
    )
    variant = {"VariantName": "AllTraffic", "ModelName": name, "InstanceType": instance, "InitialInstanceCount": 1}
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{**variant, **LIMITS}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    if wait:
        box.wait_in_service(name)


@pytest.fixture(scope="module")
def deployed(embedded_aws: EmbeddedAws, built: tuple[Path, Path]) -> Path:
    folder, fp32 = built
    from sagebox.pipeline.package.tarball import package_model_dir

    tarball = package_model_dir(fp32, fp32.parent.parent / "out-fp32.tar.gz").path
    data = upload(embedded_aws, f"llm/{NAME}/model.tar.gz", tarball.read_bytes())
    _deploy(embedded_aws, NAME, data, "ml.c6i.xlarge", {"MAX_TOTAL_TOKENS": "200"})
    return folder


@pytest.fixture(scope="module")
def deployed_inf2(embedded_aws: EmbeddedAws, built: tuple[Path, Path]) -> dict[str, Any]:
    """The FP32 directory compiled for NeuronCores (batch 2, 128 tokens, auto-cast none) on ml.inf2.xlarge: its model
    data, and how many seconds the compile and the deployment took."""
    from sagebox.pipeline.compile.generation import DecoderCompile, compile_generation
    from sagebox.pipeline.package.tarball import package_model_dir

    _, fp32 = built
    started = time.perf_counter()
    neuron = fp32.parent / "neuron"
    compile_generation(fp32, neuron, DecoderCompile(batch_size=2, max_length=128, auto_cast="none", target="inf2"))
    compiled = time.perf_counter()
    tarball = package_model_dir(neuron, fp32.parent.parent / "out-neuron.tar.gz").path
    data = upload(embedded_aws, f"llm/{INF2_NAME}/model.tar.gz", tarball.read_bytes())
    environment = {"HF_NUM_CORES": "1", "MAX_BATCH_SIZE": "2", "MAX_TOTAL_TOKENS": "128", "HF_AUTO_CAST_TYPE": "fp32"}
    _deploy(embedded_aws, INF2_NAME, data, "ml.inf2.xlarge", environment)
    return {"data": data, "compile_s": compiled - started, "deploy_s": time.perf_counter() - compiled}


def _greedy(folder: Path, max_new: int) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tokenizer(PROMPT, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new, do_sample=False)
    return str(tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True))


def _lines(response: dict[str, Any]) -> tuple[list[str], int]:
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"]]
    return [line.removeprefix("data: ") for line in b"".join(parts).decode().split("\n\n") if line], len(parts)


def test_invoke_answers_transformers_text_and_the_stream_adds_up_to_it(
    deployed: Path, embedded_aws: EmbeddedAws
) -> None:
    runtime = embedded_aws.client("sagemaker-runtime")
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 24}}
    answer = json.loads(
        runtime.invoke_endpoint(EndpointName=NAME, Body=json.dumps(body), ContentType="application/json")["Body"].read()
    )
    expected = _greedy(deployed, 24)
    assert answer[0]["generated_text"] == expected
    streamed = runtime.invoke_endpoint_with_response_stream(
        EndpointName=NAME, Body=json.dumps({**body, "stream": True}), ContentType="application/json"
    )
    lines, parts = _lines(streamed)
    events = [json.loads(line) for line in lines]
    assert "".join(e["token"]["text"] for e in events) == expected == events[-1]["generated_text"]
    assert parts > 1 and streamed["ContentType"].startswith("text/event-stream")


def test_the_messages_api_streams_openai_chunks_and_bad_input_is_a_model_error(
    deployed: Path, embedded_aws: EmbeddedAws
) -> None:
    from openai.types.chat import ChatCompletionChunk

    runtime = embedded_aws.client("sagemaker-runtime")
    chat = {"messages": [{"role": "user", "content": "the dog"}], "max_tokens": 12, "temperature": 0, "stream": True}
    lines, _ = _lines(
        runtime.invoke_endpoint_with_response_stream(
            EndpointName=NAME, Body=json.dumps(chat), ContentType="application/json"
        )
    )
    assert lines[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate_json(line) for line in lines[:-1]]
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[-1].choices[0].finish_reason in ("stop", "length")
    with pytest.raises(runtime.exceptions.ModelError) as err:
        runtime.invoke_endpoint(
            EndpointName=NAME,
            Body=json.dumps({"inputs": PROMPT, "parameters": {"top_p": 2}}),
            ContentType="application/json",
        )
    assert err.value.response["OriginalStatusCode"] == 400 and "top_p" in err.value.response["OriginalMessage"]


def test_an_inf2_endpoint_of_the_compiled_model_streams_the_cpu_endpoints_tokens(
    deployed: Path, deployed_inf2: dict[str, Any], embedded_aws: EmbeddedAws
) -> None:
    runtime = embedded_aws.client("sagemaker-runtime")
    body = json.dumps({"inputs": PROMPT, "parameters": {"max_new_tokens": 24, "details": True}, "stream": True})
    streams = {
        name: [
            json.loads(line)
            for line in _lines(
                runtime.invoke_endpoint_with_response_stream(
                    EndpointName=name, Body=body, ContentType="application/json"
                )
            )[0]
        ]
        for name in (NAME, INF2_NAME)
    }
    tokens = {name: [event["token"]["id"] for event in events] for name, events in streams.items()}
    assert len(tokens[NAME]) == 24 and tokens[INF2_NAME] == tokens[NAME]
    assert streams[INF2_NAME][-1]["generated_text"] == streams[NAME][-1]["generated_text"]
    described = embedded_aws.client("sagemaker").describe_endpoint_config(EndpointConfigName=INF2_NAME)
    assert described["ProductionVariants"][0]["InstanceType"] == "ml.inf2.xlarge"
    print(f"inf2 endpoint: compile {deployed_inf2['compile_s']:.1f} s, deploy {deployed_inf2['deploy_s']:.1f} s")


def test_an_environment_that_contradicts_the_compiled_shapes_fails_the_endpoint_with_its_line(
    deployed_inf2: dict[str, Any], embedded_aws: EmbeddedAws
) -> None:
    name = "tiny-llama-inf2-batch8"
    _deploy(embedded_aws, name, deployed_inf2["data"], "ml.inf2.xlarge", {"MAX_BATCH_SIZE": "8"}, wait=False)
    sagemaker = embedded_aws.client("sagemaker")
    for _ in range(120):
        described = sagemaker.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] != "Creating":
            break
        time.sleep(0.5)
    assert described["EndpointStatus"] == "Failed"
    assert (
        "model refused: MAX_BATCH_SIZE 8 contradicts the model, compiled for batch size 2" in described["FailureReason"]
    )
