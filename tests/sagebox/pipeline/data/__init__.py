"""Tests of sagebox/pipeline/data/."""
