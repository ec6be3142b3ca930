"""Tests of sagebox/pipeline/compile/."""
