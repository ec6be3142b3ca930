"""AWS event-stream messages (`application/vnd.amazon.eventstream`), as InvokeEndpointWithResponseStream sends them.

A message is a prelude (total length, headers length: big-endian uint32 each) and its CRC32, the headers (name length
uint8, name, value type 7 = string, value length uint16, value), the payload, and a CRC32 of all that came before
(https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html, "Event stream encoding"; the same
framing botocore's eventstream parser reads). Pure encoding: no I/O.
"""

from __future__ import annotations

import json
import struct
import zlib

_STRING = 7


def _headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    return out


def message(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = _headers(headers)
    prelude = struct.pack("!II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack("!I", zlib.crc32(head))


def payload_part(chunk: bytes) -> bytes:
    """One PayloadPart event of the ResponseStream union: the chunk is the event's payload (`Bytes`)."""
    return message(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, chunk
    )


def model_stream_error(message: str, error_code: str = "StreamBroken") -> bytes:
    """The ModelStreamError event that ends a stream whose container failed after it began (botocore raises it from
    the event stream as an EventStreamError with this code): "An error occurred while streaming the response body.
    This error can have the following error codes: ModelInvocationTimeExceeded, StreamBroken"
    (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_ResponseStream.html)."""
    payload = json.dumps({"Message": message, "ErrorCode": error_code}).encode()
    return message_of_exception("ModelStreamError", payload)


def message_of_exception(kind: str, payload: bytes) -> bytes:
    return message(
        {":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"}, payload
    )
