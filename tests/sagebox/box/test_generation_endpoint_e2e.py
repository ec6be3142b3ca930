"""A decoder LLM through the box as a user deploys one: `build_all --task text-generation` on a tiny Llama folder,
packaged, deployed with plain boto3 (CreateModel, CreateEndpointConfig with the LLM guides' timeouts and volume,
CreateEndpoint) and invoked through boto3's sagemaker-runtime: InvokeEndpoint answers transformers' greedy text,
InvokeEndpointWithResponseStream sends the same text in many PayloadParts, and the Messages API's chunks validate as
the openai package's types."""

from __future__ import annotations

import json
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
PROMPT = "the cat sat on"


@pytest.fixture(scope="module")
def deployed(embedded_aws: EmbeddedAws, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("llm")
    folder = causal_folder(root / "folder", "llama")
    artifacts = build_all(folder, None, root / "work", root / "out", task="text-generation", neuron=False)
    sagemaker = embedded_aws.client("sagemaker")
    data = upload(embedded_aws, f"llm/{NAME}/model.tar.gz", artifacts.tarballs["fp32"].read_bytes())
    sagemaker.create_model(
        ModelName=NAME,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": data, "Environment": {"MAX_TOTAL_TOKENS": "200"}},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=NAME,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": NAME,
                "InstanceType": "ml.c6i.xlarge",
                "InitialInstanceCount": 1,
                "ContainerStartupHealthCheckTimeoutInSeconds": 600,
                "ModelDataDownloadTimeoutInSeconds": 600,
                "VolumeSizeInGB": 30,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=NAME, EndpointConfigName=NAME)
    embedded_aws.wait_in_service(NAME)
    return folder


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
