"""Tests of sagebox/pipeline/package/."""
