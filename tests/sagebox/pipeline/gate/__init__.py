"""Tests of sagebox/pipeline/gate/."""
