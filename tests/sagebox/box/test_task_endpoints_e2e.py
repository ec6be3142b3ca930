"""Every task, from a folder and from a Hub id (through a Hub stand-in on loopback), each of the three architectures
through the box: built by `build_all` / `sagebox build`, gated, packaged, deployed into the box with
plain boto3 (CreateModel, CreateEndpointConfig, CreateEndpoint) and invoked through boto3's sagemaker-runtime client
with the Hugging Face inference toolkit's request. Each answer equals what the transformers pipeline answers on the
folder's PyTorch model (question answering: what the in-process predictor answers, transformers 5 having no QA
pipeline).

Every (architecture, task) pair's FP32 and INT8 answers are checked in process (tests/sagebox/pipeline/
test_task_builds.py); what the box adds (a tarball in S3, a serving process, the gateway, boto3) does not depend on
the architecture, so the box serves the folder builds of one architecture (FOLDER_ARCH: every task), one INT8 model
(INT8_ARCH) and three Hub builds, one per architecture: 8 endpoints, where one per pair and variant was 18 (a serving
process each: this file's set-up took 411 s of a clean-clone .ci/run on machine E, 2026-12-07, the suite's third
longest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from container.manifest import load_verified
from container.predictor import Predictor
from container.tasks.question_answering import Question
from sagebox.paths import REPO
from tests.conftest import EmbeddedAws
from tests.hub_standin import HubStandIn
from tests.model_factory import ARCHS
from tests.sagebox.box.test_embedded_aws import ROLE, upload
from tests.task_models import QUESTION, TASKS, TEXTS, TINY_MAX_DROP, TINY_MIN_COSINE, TaskBuild, assert_same, reference

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:tasks"
# One architecture per task through the Hub (the folder builds cover every architecture). The first is built as a
# user builds it, `sagebox build --model <id>@main` in a new process; the others through the same resolution and
# build_all in this process (saving an interpreter's imports and a Neuron compile each).
HUB_CASES = (("roberta", "text-classification"), ("distilbert", "token-classification"), ("bert", "feature-extraction"))
FOLDER_ARCH = "bert"
INT8_ARCH = "distilbert"


@dataclass(frozen=True)
class Deployed:
    endpoints: dict[str, tuple[TaskBuild, str]]  # endpoint name -> (build, variant)
    hub: dict[str, Path]  # endpoint name -> the Hub build's FP32 model directory
    commits: dict[str, str]  # repo id -> the commit the stand-in serves


def endpoint_name(arch: str, task: str, variant: str, origin: str = "folder") -> str:
    return f"{origin}-{arch}-{task}-{variant}"


def deploy(box: EmbeddedAws, name: str, package: Path) -> None:
    sagemaker = box.client("sagemaker")
    data = upload(box, f"tasks/{name}/model.tar.gz", package.read_bytes())
    sagemaker.create_model(
        ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE, "ModelDataUrl": data}
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c6i.large", "InitialInstanceCount": 1}
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


def hub_build_in_process(hub: HubStandIn, hf_home: Path, repo_id: str, root: Path) -> str:
    """The same resolution (huggingface_hub against the stand-in) and build, in this process; the build's output."""
    from sagebox.pipeline.build_all import build_all
    from sagebox.pipeline.export.servable import ModelSource

    with pytest.MonkeyPatch.context() as env:
        for name in [k for k in os.environ if k.startswith("HF_")]:
            env.delenv(name)
        env.setenv("HF_ENDPOINT", hub.url)
        env.setenv("HF_HOME", str(hf_home))
        source = ModelSource.resolve(f"{repo_id}@main")
    artifacts = build_all(
        source.folder,
        None,
        root / "work",
        root / "packages",
        source=source,
        max_drop=TINY_MAX_DROP,
        min_cosine=TINY_MIN_COSINE,
        neuron=False,
        openvino=False,
    )
    assert artifacts.source is not None
    return f"{artifacts.source.name} @ {artifacts.source.revision}"


def hub_build(hub: HubStandIn, hf_home: Path, repo_id: str, root: Path) -> subprocess.CompletedProcess[str]:
    """`sagebox build --model <repo_id>@main` as a user runs it, with the Hub variables pointing at the stand-in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_ENDPOINT": hub.url, "HF_HOME": str(hf_home)})
    args = [
        "build",
        "--model",
        f"{repo_id}@main",
        "--work",
        str(root / "work"),
        "--out",
        str(root / "packages"),
        "--max-drop",
        str(TINY_MAX_DROP),
        "--min-cosine",
        str(TINY_MIN_COSINE),
    ]
    return subprocess.run(
        [sys.executable, "-m", "sagebox", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def deployed(
    embedded_aws: EmbeddedAws, task_builds: dict[tuple[str, str], TaskBuild], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployed]:
    endpoints: dict[str, tuple[TaskBuild, str]] = {}
    for task in TASKS:
        built = task_builds[(FOLDER_ARCH, task)]
        name = endpoint_name(FOLDER_ARCH, task, "fp32")
        deploy(embedded_aws, name, built.packages / "fp32" / "model.tar.gz")
        endpoints[name] = (built, "fp32")
    built = task_builds[(INT8_ARCH, "text-classification")]  # what the gate kept serves too
    name = endpoint_name(INT8_ARCH, "text-classification", "int8")
    deploy(embedded_aws, name, built.packages / "int8" / "model.tar.gz")
    endpoints[name] = (built, "int8")
    root = tmp_path_factory.mktemp("hub-builds")
    hub_dirs: dict[str, Path] = {}
    with HubStandIn() as hub:
        commits = {}
        for index, (arch, task) in enumerate(HUB_CASES):
            repo_id = f"sagebox-tests/{arch}-{task}"
            commits[repo_id] = hub.add_repo(repo_id, {"main": task_builds[(arch, task)].folder})["main"]
            if index == 0:
                result = hub_build(hub, root / "hf-home", repo_id, root / f"{arch}-{task}")
                assert result.returncode == 0, result.stderr[-2000:]
                said = result.stdout
            else:
                said = hub_build_in_process(hub, root / "hf-home", repo_id, root / f"{arch}-{task}")
            assert f"{repo_id} @ {commits[repo_id]}" in " ".join(said.split())  # however the console wrapped it
            name = endpoint_name(arch, task, "fp32", "hub")
            deploy(embedded_aws, name, root / f"{arch}-{task}" / "packages" / "fp32" / "model.tar.gz")
            endpoints[name] = (task_builds[(arch, task)], "fp32")
            hub_dirs[name] = root / f"{arch}-{task}" / "work" / "quantized" / "fp32"
    sagemaker = embedded_aws.client("sagemaker")
    try:
        for name in endpoints:
            embedded_aws.wait_in_service(name)
        yield Deployed(endpoints, hub_dirs, commits)
    finally:
        for name in endpoints:
            sagemaker.delete_endpoint(EndpointName=name)


def invoke(box: EmbeddedAws, name: str, body: Any, content_type: str = "application/json") -> Any:
    response = box.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=name, Body=json.dumps(body), ContentType=content_type, Accept="application/json"
    )
    assert response["ContentType"] == "application/json"
    return json.loads(response["Body"].read())


@pytest.mark.parametrize("task", TASKS)
def test_each_task_answers_through_boto3_as_the_pipeline_does(
    embedded_aws: EmbeddedAws, deployed: Deployed, task: str
) -> None:
    name = endpoint_name(FOLDER_ARCH, task, "fp32")
    built, _ = deployed.endpoints[name]
    if task == "question-answering":
        answer = invoke(embedded_aws, name, {"inputs": QUESTION})
        predictor = Predictor.load(built.model_dir("fp32"))
        [expected] = predictor.infer([Question(**QUESTION)])
        assert answer == expected.to_dict()
        assert QUESTION["context"][answer["start"] : answer["end"]] == answer["answer"]
        return
    got = invoke(embedded_aws, name, {"inputs": list(TEXTS)})
    assert_same(task, got, reference(built.folder, task, TEXTS))
    single = invoke(embedded_aws, name, {"inputs": TEXTS[0]})
    expected_single = reference(built.folder, task, TEXTS[:1])
    if task == "text-classification":
        assert_same(task, single, expected_single)  # the pipeline's one-element list for one text
    else:
        assert_same(task, [single], expected_single)


def test_a_hub_model_pins_its_commit_and_answers_as_the_folder_it_came_from(
    embedded_aws: EmbeddedAws, deployed: Deployed
) -> None:
    for arch, task in HUB_CASES:
        name = endpoint_name(arch, task, "fp32", "hub")
        built, _ = deployed.endpoints[name]
        manifest = load_verified(deployed.hub[name])
        repo_id = f"sagebox-tests/{arch}-{task}"
        assert (manifest.source.name, manifest.source.origin) == (repo_id, "hub")
        assert manifest.source.revision == deployed.commits[repo_id] and manifest.source.license == "mit"
        assert_same(task, invoke(embedded_aws, name, {"inputs": list(TEXTS)}), reference(built.folder, task, TEXTS))


def test_the_gated_int8_classifier_serves_with_parameters(embedded_aws: EmbeddedAws, deployed: Deployed) -> None:
    name = endpoint_name(INT8_ARCH, "text-classification", "int8")
    ranked = invoke(embedded_aws, name, {"inputs": list(TEXTS), "parameters": {"top_k": None}})
    assert [sorted(r["label"] for r in answer) for answer in ranked] == [["negative", "neutral", "positive"]] * 3
    assert all(abs(sum(r["score"] for r in answer) - 1.0) < 1e-5 for answer in ranked)


@pytest.mark.parametrize(
    ("task", "body", "fragment"),
    [
        ("text-classification", {"inputs": 5}, "must be a string or an object with 'text'"),
        ("text-classification", {"inputs": "a", "parameters": {"top_k": 0}}, "'top_k' must be in [1"),
        ("token-classification", {"inputs": "a", "parameters": {"aggregation_strategy": "x"}}, "aggregation_strategy"),
        ("feature-extraction", {"inputs": ["a", ""]}, "item 1: input is empty"),
        ("feature-extraction", {"inputs": "a", "parameters": {"pooling": "cls"}}, "unknown parameter(s) pooling"),
    ],
)
def test_bad_input_is_a_400_model_error_with_a_json_reason(
    embedded_aws: EmbeddedAws, deployed: Deployed, task: str, body: Any, fragment: str
) -> None:
    with pytest.raises(ClientError) as err:
        invoke(embedded_aws, endpoint_name(FOLDER_ARCH, task, "fp32"), body)
    assert err.value.response["Error"]["Code"] == "ModelError"
    assert err.value.response["OriginalStatusCode"] == 400
    reason = json.loads(err.value.response["OriginalMessage"])
    assert reason["status"] == 400 and fragment in reason["message"]


def test_every_architecture_and_task_goes_through_the_box(deployed: Deployed) -> None:
    served = [(built.arch, built.task) for built, _ in deployed.endpoints.values()]
    assert {arch for arch, _ in served} == set(ARCHS)
    assert {task for _, task in served} == set(TASKS)
