"""Sagebox scripts and the `sagebox` CLI that fronts them."""
