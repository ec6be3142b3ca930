"""Event-stream framing, read back by botocore's own parser (which checks both CRCs)."""

from __future__ import annotations

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from sagebox.box import eventstream


def _messages(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(dict(m.headers), m.payload) for m in buffer]


def test_payload_parts_read_back_with_their_headers_and_bytes() -> None:
    data = eventstream.payload_part(b'{"answer": "caf\\u00e9"}') + eventstream.payload_part(b"\x00\xff" * 3000)
    (first, second) = _messages(data)
    assert first == (
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"},
        b'{"answer": "caf\\u00e9"}',
    )
    assert second[1] == b"\x00\xff" * 3000


def test_a_corrupted_message_fails_its_checksum() -> None:
    data = bytearray(eventstream.message({":message-type": "event", "ünï": "cødé"}, b"payload"))
    assert _messages(bytes(data))[0] == ({":message-type": "event", "ünï": "cødé"}, b"payload")
    data[-6] ^= 1
    with pytest.raises(ChecksumMismatch):
        _messages(bytes(data))
