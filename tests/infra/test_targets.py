from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import TargetError
from infra.targets import DEFAULT_TARGETS_FILE, load_targets, merge_defaults, parse_targets, select

MINIMAL = {
    "name": "c5-fp32",
    "instance_type": "ml.c5.2xlarge",
    "variant": "fp32",
    "model_data": "fp32/model.tar.gz",
}


def test_bundled_targets_cover_the_issue_targets() -> None:
    targets = {t.name: t for t in load_targets(DEFAULT_TARGETS_FILE)}
    assert {name: (t.instance_type, t.variant) for name, t in targets.items()} == {
        "c5-fp32": ("ml.c5.2xlarge", "fp32"),
        "c6i-fp32": ("ml.c6i.2xlarge", "fp32"),
        "c6i-int8": ("ml.c6i.2xlarge", "int8"),
        "inf2-neuron": ("ml.inf2.xlarge", "neuron"),
        "trn1-neuron": ("ml.trn1.2xlarge", "neuron"),
    }
    # Defaults reach every target; a target's own nested keys override one field, not the whole object.
    assert all(t.autoscaling and t.autoscaling.max_instances == 2 for t in targets.values())
    assert targets["inf2-neuron"].alarms.latency_p90_ms == 200
    assert targets["inf2-neuron"].alarms.errors_5xx_per_minute == 1
    assert targets["c6i-int8"].data_capture is not None and targets["c5-fp32"].data_capture is None
    # No bundled target accepts emulated Neuron models on real accelerators: the local box allows them itself.
    assert not any(t.allow_emulated for t in targets.values())


def test_defaults_merge_one_level_and_null_clears() -> None:
    merged = merge_defaults(
        {"autoscaling": {"min_instances": 1, "max_instances": 4}, "image": "build"},
        {"autoscaling": {"max_instances": 3}, "image": None},
    )
    assert merged == {"autoscaling": {"min_instances": 1, "max_instances": 3}, "image": None}
    [target] = parse_targets(
        {
            "defaults": {"autoscaling": {"max_instances": 2, "invocations_per_instance": 5}},
            "targets": [{**MINIMAL, "autoscaling": None}],
        }
    )
    assert target.autoscaling is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "C5_fp32"}, "targets[0] (C5_fp32): name: String should match pattern"),
        ({"variant": "fp16"}, "variant: Input should be 'fp32', 'int8' or 'neuron'"),
        ({"instance_count": 0}, "instance_count: Input should be greater than or equal to 1"),
        ({"model_data": "s3://bucket-only"}, "model_data: 's3://bucket-only' is not an s3://bucket/key URI"),
        ({"colour": "blue"}, "colour: Extra inputs are not permitted"),
        (
            {"autoscaling": {"min_instances": 3, "max_instances": 2, "invocations_per_instance": 10}},
            "autoscaling: min_instances (3) exceeds max_instances (2)",
        ),
        (
            {"instance_count": 5, "autoscaling": {"max_instances": 2, "invocations_per_instance": 10}},
            "instance_count (5) is outside autoscaling bounds [1, 2]",
        ),
        ({"data_capture": {"sampling_percent": 0}}, "data_capture.sampling_percent: Input should be greater"),
        ({"data_capture": {"sampling_percent": 5, "capture": ["input", "input"]}}, "each once"),
        ({"startup_timeout_s": 5}, "startup_timeout_s: Input should be greater than or equal to 60"),
        ({"neuron_backend": "neuronx"}, "neuron_backend: Input should be 'neuron_emu' or 'torch_neuronx'"),
        ({"neuron_base_image": "my image"}, "neuron_base_image: String should match pattern"),
        ({"allow_emulated": "perhaps"}, "allow_emulated: Input should be a valid boolean"),
    ],
)
def test_invalid_target_fields_are_named_in_one_line(change: dict[str, object], message: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_targets({"targets": [{**MINIMAL, **change}]}, "my-targets.json")
    text = str(caught.value)
    assert text.startswith("my-targets.json: targets[0]") and message in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected an object with a 'targets' list"),
        ({"targets": []}, "'targets' must be a non-empty list"),
        ({"targets": [MINIMAL], "extra": 1}, "unknown top-level key(s) extra"),
        ({"targets": [MINIMAL, MINIMAL]}, "target name 'c5-fp32' appears more than once"),
        ({"targets": [{**MINIMAL, "name": "artifacts"}]}, "'artifacts' is reserved"),
        ({"targets": ["c5"]}, "targets[0] must be an object"),
    ],
)
def test_invalid_files(data: object, message: str) -> None:
    with pytest.raises(TargetError, match=None) as caught:
        parse_targets(data)
    assert message in str(caught.value)


def test_comment_keys_are_allowed() -> None:
    assert parse_targets({"_about": "notes", "targets": [MINIMAL]})[0].name == "c5-fp32"


def test_load_reports_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        load_targets(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"targets": [}')
    with pytest.raises(TargetError, match=r"bad.json: not valid JSON: .* at line 1"):
        load_targets(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"targets": [MINIMAL]}))
    assert load_targets(good)[0].instance_type == "ml.c5.2xlarge"


def test_select_keeps_file_order_and_rejects_unknown_names() -> None:
    targets = load_targets()
    assert [t.name for t in select(targets, ["trn1-neuron", "c5-fp32"])] == ["c5-fp32", "trn1-neuron"]
    assert select(targets, None) == targets
    with pytest.raises(TargetError, match="unknown target"):
        select(targets, ["c7-fp32"])


def test_several_targets_files_add_up_with_unique_names(tmp_path: Path) -> None:
    from infra.targets import load_target_files

    embeddings = DEFAULT_TARGETS_FILE.parent / "examples" / "embeddings.json"
    both = load_target_files([DEFAULT_TARGETS_FILE, embeddings])
    names = [t.name for t in both]
    assert names[-1] == "c6i-embeddings" and names[:-1] == [t.name for t in load_targets(DEFAULT_TARGETS_FILE)]
    emb = both[-1]
    assert [v.name for v in emb.production_variants or ()] == ["int8", "fp32"]
    assert emb.alarms.latency_p90_ms == 500  # its own file's defaults, not infra/targets.json's
    with pytest.raises(TargetError, match="target name 'c5-fp32' appears more than once"):
        load_target_files([DEFAULT_TARGETS_FILE, DEFAULT_TARGETS_FILE])
