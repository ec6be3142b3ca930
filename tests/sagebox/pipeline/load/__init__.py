"""Tests of sagebox/pipeline/load/."""
