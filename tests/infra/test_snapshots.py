"""Snapshots of every template, asset hashes masked. Re-record with SAGEBOX_UPDATE_SNAPSHOTS=1."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import ALL_TARGETS

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
STACKS = ["sagebox-artifacts", *(f"sagebox-{name}" for name in ALL_TARGETS)]


def masked(template: dict[str, Any]) -> str:
    return ASSET_HASH.sub("<asset-hash>", json.dumps(template, indent=1, sort_keys=True)) + "\n"


def test_masking_hides_the_asset_hashes_and_nothing_else(templates: dict[str, dict[str, Any]]) -> None:
    raw = json.dumps(templates["sagebox-c5-fp32"], indent=1, sort_keys=True)
    hashes = set(ASSET_HASH.findall(raw))
    assert len(hashes) == 2  # the image and the model data
    text = masked(templates["sagebox-c5-fp32"])
    assert not ASSET_HASH.search(text)
    assert text.count("<asset-hash>") == sum(raw.count(h) for h in hashes)
    assert text.replace("<asset-hash>", "") == ASSET_HASH.sub("", raw) + "\n"


@pytest.mark.parametrize("stack", STACKS)
def test_template_matches_its_snapshot(templates: dict[str, dict[str, Any]], stack: str) -> None:
    path = SNAPSHOTS / f"{stack}.json"
    text = masked(templates[stack])
    if os.environ.get("SAGEBOX_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no snapshot {path.name}: record it with SAGEBOX_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{stack} changed: review the diff, then re-record with SAGEBOX_UPDATE_SNAPSHOTS=1"
