"""Tests of sagebox/pipeline/quantize/."""
