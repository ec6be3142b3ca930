"""Sagebox infrastructure: the instance catalog (pure data) and the AWS CDK app (imported only when synthesizing)."""
