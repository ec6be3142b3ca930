"""Tests of sagebox/pipeline/export/."""
