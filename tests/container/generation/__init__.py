"""Tests of container/generation/ (text generation: requests, sampling, detokenizing, stops, events)."""
