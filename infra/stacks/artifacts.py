"""The artifacts stack: KMS key, model/data-capture bucket (and its access-log bucket), image repository."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

# Images kept in the repository: tagged releases up to this count, untagged layers for this many days.
KEEP_TAGGED_IMAGES = 30
UNTAGGED_IMAGE_DAYS = 7


# The artifacts bucket's name: every stack of the account and region knows it without a cross-stack export.
BUCKET_NAME = "{prefix}-artifacts-{account}-{region}"


def bucket_name(prefix: str) -> str:
    return BUCKET_NAME.format(prefix=prefix, account=cdk.Aws.ACCOUNT_ID, region=cdk.Aws.REGION)


class ArtifactsStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, prefix: str, **kwargs: Any) -> None:
        super().__init__(
            scope,
            construct_id,
            description="Sagebox artifacts: KMS key, encrypted model/data-capture bucket, image repository",
            **kwargs,
        )
        self.key = kms.Key(
            self,
            "Key",
            description="Sagebox: model artifacts, data capture and endpoint volumes",
            enable_key_rotation=True,
            # Deleting the stack schedules the key's deletion; it can be cancelled for 30 days.
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(30),
        )
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=cdk.Duration.days(365), noncurrent_version_expiration=cdk.Duration.days(30))
            ],
            # Access logs outlive the stack (generated name: a later deploy creates a new log bucket).
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.prefix = prefix
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name(prefix),
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=cdk.Duration.days(90),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(7),
                )
            ],
            # Fixed name, so a retained bucket would block a later deploy. CloudFormation refuses to delete a
            # bucket that holds objects: destroying the stack never deletes models or captured data.
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.repository = ecr.Repository(
            self,
            "Repository",
            repository_name=f"{prefix}-serving",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description=f"Expire untagged images after {UNTAGGED_IMAGE_DAYS} days",
                    rule_priority=1,
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=cdk.Duration.days(UNTAGGED_IMAGE_DAYS),
                ),
                ecr.LifecycleRule(
                    description=f"Keep the newest {KEEP_TAGGED_IMAGES} images",
                    rule_priority=2,
                    tag_status=ecr.TagStatus.ANY,
                    max_image_count=KEEP_TAGGED_IMAGES,
                ),
            ],
            # As for the bucket: deleting the stack fails, and deletes nothing, while images remain.
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        cdk.CfnOutput(self, "BucketName", value=self.bucket.bucket_name, description="Model and data-capture bucket")
        cdk.CfnOutput(self, "RepositoryUri", value=self.repository.repository_uri, description="Serving images")
        cdk.CfnOutput(self, "KeyArn", value=self.key.key_arn, description="Encrypts the bucket, capture, volumes")
