"""Production variants, shadow variants, serverless and asynchronous endpoints: the example targets file
(infra/examples/endpoint-types.json) synthesized once with cdk-nag and CloudFormation validation, cfn-lint on its
templates, snapshots, and every restriction SageMaker documents refused at synth in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra import nag
from infra.app import build
from infra.errors import TargetError
from infra.plan import plan_endpoint, plan_endpoints
from infra.settings import REPO_ROOT, AppSettings
from infra.targets import load_targets, parse_targets
from tests.infra.conftest import Synthesized
from tests.infra.stacks.test_endpoint import flat, one, resources
from tests.infra.test_snapshots import SNAPSHOTS, masked

pytestmark = pytest.mark.slow

EXAMPLE = REPO_ROOT / "infra" / "examples" / "endpoint-types.json"
STACKS = ("sagebox-c6i-split", "sagebox-c6i-shadow", "sagebox-serverless-int8", "sagebox-c6i-async")


@pytest.fixture(scope="module")
def types_settings(model_dir: Path, build_context: Path) -> AppSettings:
    return AppSettings.from_context(
        {
            "targets": str(EXAMPLE),
            "model_dir": str(model_dir),
            "build_context": str(build_context),
            "cfn_validate": True,
        },
        build_context,
        env={},
    )


@pytest.fixture(scope="module")
def types_synth(types_settings: AppSettings, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk.out.types")
    assembly = build(types_settings, outdir=outdir).synth()
    return Synthesized({s.stack_name: s.template for s in assembly.stacks}, outdir, 0.0)


def statements(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [role] = resources(template, "AWS::IAM::Role").values()
    [policy] = role["Properties"]["Policies"]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_example_synthesizes_with_cdk_nag_clean(types_synth: Synthesized) -> None:
    assert set(types_synth.templates) == {"sagebox-artifacts", *STACKS}
    report = json.loads((types_synth.outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []  # cdk-nag (and CloudFormation validation) found nothing unacknowledged


def test_cfn_lint_passes_for_every_new_endpoint_type(types_synth: Synthesized, tmp_path: Path) -> None:
    paths = []
    for name in STACKS:
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(types_synth.templates[name]))
        paths.append(str(path))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", "--", *paths],
        capture_output=True,
        text=True,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    errors = [f"{f['Rule']['Id']} {f['Filename']}: {f['Message']}" for f in findings if f["Level"] == "Error"]
    assert errors == []
    assert result.returncode in (0, 4, 8), result.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_new_endpoint_types_match_their_snapshots(types_synth: Synthesized, stack: str) -> None:
    path = SNAPSHOTS / f"endpoint-types-{stack}.json"
    text = masked(types_synth.templates[stack])
    if os.environ.get("SAGEBOX_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    assert path.is_file(), f"no snapshot {path.name}: record it with SAGEBOX_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{stack} changed: review the diff, then re-record with SAGEBOX_UPDATE_SNAPSHOTS=1"


def test_a_traffic_split_renders_two_weighted_variants_with_their_own_models_alarms_and_scaling(
    types_synth: Synthesized,
) -> None:
    template = types_synth.templates["sagebox-c6i-split"]
    config = one(template, "AWS::SageMaker::EndpointConfig")
    variants = {v["VariantName"]: v for v in config["ProductionVariants"]}
    assert {n: (v["InitialVariantWeight"], v["InstanceType"]) for n, v in variants.items()} == {
        "int8": (0.9, "ml.c6i.2xlarge"),
        "fp32": (0.1, "ml.c5.2xlarge"),
    }
    assert variants["int8"]["ModelName"] == {"Fn::GetAtt": ["Model", "ModelName"]}
    assert variants["fp32"]["ModelName"] == {"Fn::GetAtt": ["ModelFp32", "ModelName"]}
    assert "ShadowProductionVariants" not in config
    # The role reads exactly the two model objects, each variant has its own rollback alarms and scaling.
    assert len(as_list(statements(template)["ReadModelData"]["Resource"])) == 2
    alarms = {a["Properties"]["AlarmName"] for a in resources(template, "AWS::CloudWatch::Alarm").values()}
    assert alarms == {
        f"sagebox-c6i-split-{v}-{kind}" for v in ("int8", "fp32") for kind in ("model-latency-p90", "5xx-errors")
    }
    rollback = one(template, "AWS::SageMaker::Endpoint")["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    assert {a["AlarmName"] for a in rollback} == alarms
    targets = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert sorted(flat(t["Properties"]["ResourceId"]).rsplit("/", 1)[1] for t in targets) == ["fp32", "int8"]


def test_a_shadow_variant_gets_its_sampled_share_as_weight(types_synth: Synthesized) -> None:
    template = types_synth.templates["sagebox-c6i-shadow"]
    config = one(template, "AWS::SageMaker::EndpointConfig")
    [production] = config["ProductionVariants"]
    [shadow] = config["ShadowProductionVariants"]
    assert (production["VariantName"], production["InitialVariantWeight"]) == ("int8", 1)
    assert (shadow["VariantName"], shadow["InitialVariantWeight"]) == ("fp32-shadow", 0.5)
    assert shadow["ModelName"] == {"Fn::GetAtt": ["ModelFp32Shadow", "ModelName"]}
    # Rollback alarms watch production only: a shadow's answers never reach callers.
    dims = [
        {d["Name"]: d["Value"] for d in a["Properties"]["Dimensions"]}
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
    ]
    assert {d["VariantName"] for d in dims} == {"int8"}


def test_a_serverless_target_renders_serverless_config_and_nothing_instance_based(types_synth: Synthesized) -> None:
    template = types_synth.templates["sagebox-serverless-int8"]
    config = one(template, "AWS::SageMaker::EndpointConfig")
    [variant] = config["ProductionVariants"]
    assert variant["ServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 10}
    for key in ("InstanceType", "InitialInstanceCount", "ContainerStartupHealthCheckTimeoutInSeconds"):
        assert key not in variant
    assert "KmsKeyId" not in config  # no instance volume to encrypt
    assert one(template, "AWS::SageMaker::Model")["EnableNetworkIsolation"] is False  # unsupported on serverless
    assert resources(template, "AWS::ApplicationAutoScaling::ScalableTarget") == {}
    environment = one(template, "AWS::SageMaker::Model")["PrimaryContainer"]["Environment"]
    assert (environment["SAGEMAKER_MODEL_SERVER_WORKERS"], environment["SAGEBOX_INTRA_OP_THREADS"]) == ("1", "1")
    dashboard = flat(one(template, "AWS::CloudWatch::Dashboard")["DashboardBody"])
    assert "ModelSetupTime" in dashboard
    assert template["Outputs"]["Serverless"]["Value"] == "2048 MB, max concurrency 10"


def test_an_async_target_renders_its_config_least_privilege_grants_and_backlog_scaling(
    types_synth: Synthesized,
) -> None:
    template = types_synth.templates["sagebox-c6i-async"]
    config = one(template, "AWS::SageMaker::EndpointConfig")
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert output["S3OutputPath"] == "s3://sagebox-async-example/outputs"
    assert output["S3FailurePath"] == "s3://sagebox-async-example/failures"
    success, error = "arn:aws:sns:us-east-1:123456789012:sagebox-async-success", "arn:aws:sns:us-east-1:123456789012:"
    assert output["NotificationConfig"] == {"SuccessTopic": success, "ErrorTopic": error + "sagebox-async-error"}
    assert config["AsyncInferenceConfig"]["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 2}
    granted = statements(template)
    assert granted["ReadAsyncInputs"]["Action"] == "s3:GetObject"
    assert flat(granted["ReadAsyncInputs"]["Resource"]).endswith(":s3:::sagebox-async-example/inputs/*")
    written = sorted(flat(r).rsplit(":::", 1)[1] for r in as_list(granted["WriteAsyncResults"]["Resource"]))
    assert written == ["sagebox-async-example/failures/*", "sagebox-async-example/outputs/*"]
    assert granted["WriteAsyncResults"]["Action"] == "s3:PutObject"
    assert sorted(as_list(granted["NotifyAsyncResults"]["Resource"])) == [error + "sagebox-async-error", success]
    [policy] = resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 5
    assert tracking["CustomizedMetricSpecification"] == {
        "MetricName": "ApproximateBacklogSizePerInstance",
        "Namespace": "AWS/SageMaker",
        "Dimensions": [{"Name": "EndpointName", "Value": "sagebox-c6i-async"}],
        "Statistic": "Average",
    }


def test_each_async_acknowledgement_answers_a_finding(
    types_settings: AppSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With acknowledgements withheld the async stack fails on exactly the wildcards acknowledged: the input and
    output prefixes (objects named at run time), besides the logs and metrics ones every stack has."""
    acknowledged: set[tuple[str, str]] = set()

    def record(scope: Any, rule: str, reason: str) -> None:
        assert len(reason) > 40, f"{rule} needs a real reason, got {reason!r}"
        acknowledged.add((scope.node.path, rule))

    monkeypatch.setattr(nag, "acknowledge", record)
    settings = AppSettings(**{**vars(types_settings), "only": ("c6i-async",), "cfn_validate": False})
    app = build(settings, outdir=tmp_path)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    [plugin] = report["pluginReports"]
    found = {
        (construct["constructPath"].removesuffix("/Resource"), violation["ruleName"])
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }
    assert found == acknowledged
    prefixes = {rule for path, rule in found if path == "sagebox-c6i-async/ExecutionRole" and ":s3:::" in rule}
    assert prefixes == {
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::sagebox-async-example/{p}/*]"
        for p in ("inputs", "outputs", "failures")
    }


# --- targets and plans: one-line errors ------------------------------------------------------------------------

BASE = {
    "name": "t1",
    "instance_type": "ml.c6i.2xlarge",
    "model_data": "s3://models/int8/model.tar.gz",
    "variant": "int8",
}
SERVERLESS = {
    "name": "t1",
    "model_data": "s3://models/int8/model.tar.gz",
    "variant": "int8",
    "serverless": {"memory_mb": 2048, "max_concurrency": 5},
}
ASYNC = {"output_path": "s3://my-bucket/out", "input_path": "s3://my-bucket/in"}
SCALING = {"max_instances": 2, "invocations_per_instance": 10}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({**SERVERLESS, "instance_type": "ml.c5.2xlarge"}, "a serverless endpoint has no instance type"),
        ({**SERVERLESS, "autoscaling": SCALING}, "scales by itself up to max_concurrency; set autoscaling: null"),
        ({**SERVERLESS, "data_capture": {"sampling_percent": 5}}, "does not capture data of serverless endpoints"),
        ({**SERVERLESS, "instance_count": 2}, "a serverless endpoint has no instance count"),
        (
            {**SERVERLESS, "production_variants": [{"name": "a"}, {"name": "b"}]},
            "a serverless endpoint has one production variant",
        ),
        ({**SERVERLESS, "async": ASYNC}, "a target is serverless or async"),
        ({**SERVERLESS, "serverless": {"memory_mb": 1500, "max_concurrency": 5}}, "1500 is not one of 1024, 2048"),
        ({**SERVERLESS, "serverless": {"memory_mb": 8192, "max_concurrency": 5}}, "less than or equal to 6144"),
        ({**SERVERLESS, "serverless": {"memory_mb": 2048, "max_concurrency": 201}}, "less than or equal to 200"),
        ({**SERVERLESS, "shadow_variants": [{"name": "s"}]}, "serverless endpoints cannot have shadow variants"),
        (
            {**BASE, "production_variants": [{"name": "a"}, {"name": "b"}], "shadow_variants": [{"name": "s"}]},
            "exactly one production variant and one shadow variant",
        ),
        ({**BASE, "shadow_variants": [{"name": "s"}, {"name": "t"}]}, "exactly one production variant and one"),
        ({**BASE, "async": ASYNC, "shadow_variants": [{"name": "s"}]}, "asynchronous endpoints cannot have shadow"),
        ({**BASE, "async": {"input_path": "s3://my-bucket/in"}}, "async.output_path: Field required"),
        ({**BASE, "async": {**ASYNC, "output_path": "https://x/y"}}, "'https://x/y' is not an s3://bucket[/prefix]"),
        ({**BASE, "async": {**ASYNC, "success_topic": "my-topic"}}, "async.success_topic: String should match"),
        ({**BASE, "autoscaling": {"max_instances": 2, "backlog_per_instance": 5}}, "tracks an asynchronous endpoint"),
        ({**BASE, "autoscaling": {**SCALING, "backlog_per_instance": 5}}, "set one of invocations_per_instance and"),
        (
            {**BASE, "production_variants": [{"name": "a"}, {"name": "a", "weight": 2}]},
            "variant name 'a' appears more than once",
        ),
        ({**BASE, "production_variants": [{"name": "a", "weight": 0}]}, "at least one weight must be above 0"),
        ({**BASE, "production_variants": [{"name": "a_b"}]}, "production_variants.0.name: String should match"),
        ({**BASE, "shadow_variants": [{"name": "s", "weight": 0.5}]}, "shadow_variants.0.weight: Extra inputs"),
        ({**BASE, "shadow_variants": [{"name": "s", "sampling_percent": 0}]}, "greater than or equal to 1"),
        ({k: v for k, v in BASE.items() if k != "instance_type"}, "instance_type is required"),
        (
            {**BASE, "autoscaling": SCALING, "production_variants": [{"name": "a", "instance_count": 3}]},
            "variant a: instance_count (3) is outside autoscaling bounds [1, 2]",
        ),
    ],
)
def test_documented_restrictions_are_one_line_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_targets({"targets": [fields]}, "types.json")
    text = str(caught.value)
    assert text.startswith("types.json: targets[0] (t1)") and message in text, text
    assert "\n" not in text


def test_variants_take_the_targets_fields_unless_they_set_their_own(model_dir: Path) -> None:
    settings = AppSettings(model_dir=model_dir, image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/s:1")
    [target] = parse_targets(
        {
            "targets": [
                {
                    **BASE,
                    "model_data": "int8/model.tar.gz",
                    "environment": {"SAGEBOX_MAX_BATCH_SIZE": "4"},
                    "production_variants": [
                        {"name": "int8", "weight": 3},
                        {
                            "name": "fp32",
                            "model_data": "fp32/model.tar.gz",
                            "environment": {"SAGEBOX_LOG_LEVEL": "debug"},
                        },
                    ],
                    "shadow_variants": [],
                }
            ]
        }
    )
    plan = plan_endpoint(target, settings)
    int8, fp32 = plan.variants
    assert (int8.variant, int8.weight, int8.instance.name) == ("int8", 3, "ml.c6i.2xlarge")
    assert (fp32.variant, fp32.weight, fp32.instance.name) == ("fp32", 1.0, "ml.c6i.2xlarge")  # read from its manifest
    assert fp32.environment["SAGEBOX_MAX_BATCH_SIZE"] == "4" and fp32.environment["SAGEBOX_LOG_LEVEL"] == "debug"
    assert "SAGEBOX_LOG_LEVEL" not in target.environment and int8.environment["SAGEBOX_LOG_LEVEL"] == "info"
    assert (plan.variant, plan.model) == (int8.variant, int8.model)  # the plan's own fields: the first variant's
    # `-c model_data` replaces the target's model data, not a variant's own.
    overridden = AppSettings(**{**vars(settings), "model_data": {"t1": "s3://elsewhere/x/model.tar.gz"}})
    [moved] = plan_endpoints([target.model_copy(update={"variant": "int8"})], overridden)
    assert moved.variants[0].model.uri == "s3://elsewhere/x/model.tar.gz"  # type: ignore[union-attr]
    assert moved.variants[1].model == fp32.model


def test_serverless_plans_refuse_neuron_artifacts_and_models_larger_than_their_memory() -> None:
    settings = AppSettings(image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/s:1")
    plan = plan_endpoint(parse_targets({"targets": [SERVERLESS]})[0], settings)
    assert (plan.instance.name, plan.canary_instances, plan.volume_kms) == ("serverless", None, False)
    with pytest.raises(TargetError, match="runs on CPU only"):
        plan_endpoint(parse_targets({"targets": [{**SERVERLESS, "variant": "neuron"}]})[0], settings)
    with pytest.raises(TargetError, match=r"larger than the serverless memory \(2048 MB\)"):
        plan_endpoint(parse_targets({"targets": [{**SERVERLESS, "model_size_gib": 3}]})[0], settings)


def test_the_bundled_targets_use_none_of_the_new_fields() -> None:
    """Backward compatibility: the default app's targets are single-variant real-time endpoints (their snapshots
    are unchanged), so the new fields are opt-in."""
    for target in load_targets():
        assert target.production_variants is None and target.shadow_variants == ()
        assert target.serverless is None and target.async_inference is None
