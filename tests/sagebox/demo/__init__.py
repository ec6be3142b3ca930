"""Tests of sagebox/demo/ (the demo models, their data and training)."""
