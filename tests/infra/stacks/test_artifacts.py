"""Artifacts stack: an encrypted, private, SSL-only, logged, versioned bucket; a locked-down repository."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template


@pytest.fixture(scope="module")
def artifacts(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return templates["sagebox-artifacts"]


def by_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_key_rotates_and_outlives_a_mistaken_destroy(artifacts: dict[str, Any]) -> None:
    [key] = by_type(artifacts, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["Properties"]["PendingWindowInDays"] == 30


def test_bucket_is_encrypted_private_versioned_and_logged(artifacts: dict[str, Any]) -> None:
    buckets = by_type(artifacts, "AWS::S3::Bucket")
    [(key_id, _)] = by_type(artifacts, "AWS::KMS::Key").items()
    [(bucket_id, bucket)] = [(k, v) for k, v in buckets.items() if "BucketName" in v["Properties"]]
    [(logs_id, logs)] = [(k, v) for k, v in buckets.items() if k != bucket_id]
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {
                "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
                "SSEAlgorithm": "aws:kms",
            },
        }
    ]
    block_all = {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["PublicAccessBlockConfiguration"] == block_all == logs["Properties"]["PublicAccessBlockConfiguration"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": "artifacts/",
    }
    assert logs["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}  # S3 server access logging cannot write to SSE-KMS buckets
    # Named bucket: deleting the stack deletes it only when empty; the access logs are kept.
    assert bucket["DeletionPolicy"] == "Delete" and logs["DeletionPolicy"] == "Retain"


def test_both_buckets_refuse_plain_http_and_the_artifacts_bucket_old_tls(artifacts: dict[str, Any]) -> None:
    policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"]["PolicyDocument"]["Statement"]
        for p in by_type(artifacts, "AWS::S3::BucketPolicy").values()
    }
    assert set(policies) == set(by_type(artifacts, "AWS::S3::Bucket"))
    for bucket_id, statements in policies.items():
        everything = [
            {"Fn::GetAtt": [bucket_id, "Arn"]},
            {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]},
        ]
        denies = {json.dumps(s["Condition"], sort_keys=True): s for s in statements if s["Effect"] == "Deny"}
        plain_http = denies[json.dumps({"Bool": {"aws:SecureTransport": "false"}})]
        assert (plain_http["Action"], plain_http["Principal"], plain_http["Resource"]) == (
            "s3:*",
            {"AWS": "*"},
            everything,
        )
        if "BucketName" in artifacts["Resources"][bucket_id]["Properties"]:
            old_tls = denies[json.dumps({"NumericLessThan": {"s3:TlsVersion": 1.2}})]
            assert old_tls["Resource"] == everything


def test_repository_scans_on_push_with_immutable_tags_and_a_lifecycle(artifacts: dict[str, Any]) -> None:
    template = Template.from_json(artifacts)
    template.has_resource_properties(
        "AWS::ECR::Repository",
        {
            "RepositoryName": "sagebox-serving",
            "ImageScanningConfiguration": {"ScanOnPush": True},
            "ImageTagMutability": "IMMUTABLE",
            "LifecyclePolicy": {"LifecyclePolicyText": Match.any_value()},
        },
    )
    [repo] = by_type(artifacts, "AWS::ECR::Repository").values()
    rules = json.loads(repo["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert [
        (r["selection"]["tagStatus"], r["selection"]["countType"], r["selection"]["countNumber"]) for r in rules
    ] == [
        ("untagged", "sinceImagePushed", 7),
        ("any", "imageCountMoreThan", 30),
    ]


def test_outputs_name_the_bucket_repository_and_key(artifacts: dict[str, Any]) -> None:
    assert {"BucketName", "RepositoryUri", "KeyArn"} <= set(artifacts["Outputs"])
    # The endpoint stacks import the key's ARN; bucket and repository names are fixed, so need no export.
    exports = [o["Export"]["Name"] for o in artifacts["Outputs"].values() if "Export" in o]
    assert len(exports) == 1 and "Key" in exports[0]
