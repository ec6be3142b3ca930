"""Property-based fuzz of /invocations: whatever the body, Content-Type and Accept, the payload parser answers with
a Request or a PayloadError (400/413), and the HTTP layer with JSON 2xx/4xx, never a 500 or a traceback.

Deterministic and fast: the profile below derandomizes hypothesis (the same examples every run, no example
database) and bounds the examples; the model is the gated stand-in of fakes.py, left open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from container import payload
from container.app import create_app
from container.service import InferenceService
from tests.container.fakes import GateHandler, make_service

settings.register_profile(
    "sagebox-container-fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ = settings.get_profile("sagebox-container-fuzz")

# No subnormal floats: a model loaded earlier in the test process may have set flush-to-zero on this thread
# (SAGEBOX_FLUSH_DENORMALS), and hypothesis then refuses to generate them.
# Short texts (many windows would only make the fuzz slow), including the characters tokenizers treat specially and
# halves of surrogate pairs, which no UTF-8 codec produces but a JSON escape does.
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(" \t\n£$中##-.'\"\\\x00\u200b\ufeffé"),
        st.sampled_from("\ud800\udfff"),  # unpaired surrogates: json.dumps escapes them ("\\ud800"), which parses
    ),
    max_size=60,
)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_subnormal=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
NONBLANK = TEXT.filter(lambda text: bool(text.strip()))
# What a client should send (answered 200 unless the negotiation fails) and what a broken client might.
VALID = st.fixed_dictionaries(
    {"question": NONBLANK, "context": NONBLANK}, optional={"version": st.one_of(st.text(max_size=5), st.integers())}
)
# Every JSON type at the top of a field, each as likely as the next (nested values come from JSON_VALUE).
FIELD = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_subnormal=False),
    st.lists(JSON_VALUE, max_size=3),
    st.dictionaries(TEXT, JSON_VALUE, max_size=3),
)
ANY_QUESTION = st.fixed_dictionaries(
    {"question": FIELD, "context": FIELD},
    optional={"version": FIELD, "extra": FIELD},
)
DOCUMENT = st.one_of(
    ANY_QUESTION,
    st.lists(st.one_of(VALID, ANY_QUESTION), max_size=3),
    st.fixed_dictionaries({"inputs": st.one_of(VALID, st.lists(VALID, max_size=2), JSON_VALUE)}),
    JSON_VALUE,
)


def _jsonl(items: list[Any]) -> bytes:
    return "\n".join(json.dumps(item) for item in items).encode()


def _dumps(document: Any) -> bytes:
    return json.dumps(document).encode()


# Well-formed requests are over-weighted, so a good share of the examples reaches the model and the decoder.
BODY = st.one_of(
    VALID.map(_dumps),
    st.lists(VALID, min_size=1, max_size=3).map(_dumps),
    st.lists(VALID, min_size=1, max_size=3).map(_jsonl),
    DOCUMENT.map(_dumps),
    st.lists(st.one_of(ANY_QUESTION, JSON_VALUE), max_size=3).map(_jsonl),
    DOCUMENT.map(_dumps).flatmap(lambda b: st.integers(1, len(b)).map(lambda n: b[:n])),  # cut short
    st.binary(max_size=200),
)
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
KNOWN_TYPES = ["application/json", "application/jsonlines", "application/x-ndjson", "text/json", "text/csv", ""]
CONTENT_TYPE = st.one_of(
    st.just("application/json"),
    st.sampled_from(KNOWN_TYPES),
    st.sampled_from(KNOWN_TYPES).map(lambda t: f"{t}; charset=utf-8"),
    HEADER_TEXT,
)
ACCEPT = st.one_of(
    st.none(),
    st.just("application/json"),
    st.just("application/jsonlines"),
    st.sampled_from(["*/*", "application/json", "application/jsonlines", "text/csv", "application/*;q=0.5"]),
    st.lists(st.sampled_from(["text/html", "application/jsonlines", "*/*", "image/png"]), max_size=3).map(", ".join),
    HEADER_TEXT,
)


@FUZZ
@given(body=BODY, fmt=st.sampled_from([payload.JSON, payload.JSON_LINES]))
def test_the_parser_returns_a_request_or_a_client_error(body: bytes, fmt: str) -> None:
    try:
        request = payload.parse_request(body, fmt, max_items=2)
    except payload.PayloadError as exc:
        assert exc.status in (400, 413) and str(exc)
        return
    assert 1 <= len(request.questions) <= 2
    for question in request.questions:
        assert question.question.strip() and question.context.strip()


@FUZZ
@given(header=st.one_of(st.none(), HEADER_TEXT, CONTENT_TYPE))
def test_content_negotiation_returns_a_format_or_415_406(header: str | None) -> None:
    for negotiate, status in ((payload.request_format, 415), (payload.response_format, 406)):
        try:
            assert negotiate(header) in (payload.JSON, payload.JSON_LINES)
        except payload.PayloadError as exc:
            assert exc.status == status


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient, InferenceService]]:
    """One event loop, one started service and one in-process client for every example."""
    loop = asyncio.new_event_loop()
    service = make_service(GateHandler())
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(service.settings, service)), base_url="http://sagebox"
    )
    loop.run_until_complete(service.start())
    try:
        yield loop, client, service
    finally:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(service.close())
        loop.close()


# (body, Content-Type): a well-formed request labelled as what it is, or anything labelled as anything.
REQUEST = st.one_of(
    st.lists(VALID, min_size=1, max_size=3).map(lambda items: (_dumps(items), "application/json")),
    VALID.map(lambda item: (_dumps(item), "application/json; charset=utf-8")),
    st.lists(VALID, min_size=1, max_size=3).map(lambda items: (_jsonl(items), "application/jsonlines")),
    st.tuples(BODY, CONTENT_TYPE),
    st.tuples(BODY, CONTENT_TYPE),
)


@FUZZ
@given(request=REQUEST, accept=ACCEPT)
def test_invocations_answer_json_2xx_or_4xx_whatever_arrives(
    served: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient, InferenceService],
    request: tuple[bytes, str],
    accept: str | None,
) -> None:
    loop, client, _ = served
    body, content_type = request
    headers = {"Content-Type": content_type, **({"Accept": accept} if accept is not None else {})}
    response = loop.run_until_complete(client.post("/invocations", content=body, headers=headers))
    assert response.status_code in (200, 400, 406, 413, 415), response.text
    assert "Traceback" not in response.text
    if response.status_code != 200:
        error = response.json()
        assert set(error) == {"error", "status", "message"} and error["status"] == response.status_code
        return
    if response.headers["content-type"].startswith(payload.JSON_LINES):
        answers = [json.loads(line) for line in response.text.splitlines()]
    else:
        parsed = response.json()
        answers = parsed if isinstance(parsed, list) else [parsed]
    for answer in answers:
        assert set(answer) == {"answer", "score", "start", "end"}
        assert 0 <= answer["start"] <= answer["end"] and 0.0 <= answer["score"] <= 1.0
