"""Sagebox infrastructure: the instance catalog (pure data) and the AWS CDK app (imported to synthesize)."""

import os

# Importing aws_cdk starts node through jsii, which prints a banner on Node 20 unless this is set first.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
