"""Property-based fuzz of /invocations for the text tasks (classification, NER, embeddings), each served by a real
tiny model: whatever the inputs and parameters, the answer is JSON 2xx or 4xx with a reason, never a 500 or a
traceback, and a 200 has the task's shape. Deterministic (derandomized hypothesis, no example database)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from container.app import create_app
from container.env import ServerSettings
from container.service import InferenceService
from tests.container.test_fuzz import FUZZ, JSON_VALUE, NONBLANK, TEXT

pytestmark = pytest.mark.slow

MODELS = {
    "text-classification": ("bert", "text-classification"),
    "token-classification": ("roberta", "token-classification"),
    "feature-extraction": ("distilbert", "feature-extraction"),
}
# Parameters any of the tasks knows, with values of every kind (and the names of other tasks' parameters).
PARAMETER_NAMES = st.sampled_from(
    [
        "top_k",
        "function_to_apply",
        "truncation",
        "max_length",
        "stride",
        "padding",
        "aggregation_strategy",
        "ignore_labels",
        "normalize",
        "truncate",
        "temperature",
    ]
)
PARAMETER_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=600),
    st.sampled_from(["softmax", "sigmoid", "none", "simple", "first", "average", "max", "MAX", "x"]),
    st.lists(st.sampled_from(["O", "B-PER", "PER", 3]), max_size=3),
    JSON_VALUE,
)
PARAMETERS = st.dictionaries(PARAMETER_NAMES, PARAMETER_VALUES, max_size=3)
INPUT = st.one_of(
    NONBLANK,
    TEXT,
    st.fixed_dictionaries({"text": NONBLANK}, optional={"text_pair": st.one_of(NONBLANK, TEXT, JSON_VALUE)}),
    JSON_VALUE,
)
BODY = st.one_of(
    st.fixed_dictionaries(
        {"inputs": st.one_of(INPUT, st.lists(INPUT, max_size=4))}, optional={"parameters": PARAMETERS}
    ),
    st.fixed_dictionaries({"inputs": INPUT, "parameters": JSON_VALUE}),
    INPUT,
    st.lists(INPUT, max_size=4),
    JSON_VALUE,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[asyncio.AbstractEventLoop, Any]]]:
    """One started service per task, each with an in-process client, on one event loop."""
    from sagebox.pipeline.export.servable import build_fp32
    from tests.model_factory import make_model_folder

    root = tmp_path_factory.mktemp("fuzz-tasks")
    loop = asyncio.new_event_loop()
    clients: dict[str, tuple[asyncio.AbstractEventLoop, Any]] = {}
    services = []
    try:
        for task, (arch, kind) in MODELS.items():
            model_dir = root / f"{task}-fp32"
            build_fp32(make_model_folder(root / task, arch, kind, max_seq_length=64), model_dir)
            settings = ServerSettings.from_env({"SAGEBOX_MODEL_DIR": str(model_dir), "SAGEBOX_INTRA_OP_THREADS": "1"})
            service = InferenceService(settings, drop_privileges=lambda user: None)
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(settings, service)), base_url="http://sagebox"
            )
            loop.run_until_complete(service.start())
            services.append((service, client))
            clients[task] = (loop, client)
        yield clients
    finally:
        for service, client in services:
            loop.run_until_complete(client.aclose())
            loop.run_until_complete(service.close())
        loop.close()


def _answers(body: Any, parsed: Any) -> list[Any]:
    """The per-input answers of a 200: a list of them when the request sent a list of inputs."""
    sent = body["inputs"] if isinstance(body, dict) and "inputs" in body else body
    return list(parsed) if isinstance(sent, list) else [parsed]


@pytest.mark.parametrize("task", sorted(MODELS))
@FUZZ
@given(body=BODY)
def test_text_tasks_answer_json_2xx_or_4xx_whatever_arrives(
    served: dict[str, tuple[asyncio.AbstractEventLoop, Any]], task: str, body: Any
) -> None:
    loop, client = served[task]
    raw = json.dumps(body)
    response = loop.run_until_complete(
        client.post("/invocations", content=raw.encode(), headers={"Content-Type": "application/json"})
    )
    assert response.status_code in (200, 400, 413), response.text
    assert "Traceback" not in response.text
    parsed = response.json()
    if response.status_code != 200:
        assert set(parsed) == {"error", "status", "message"} and parsed["status"] == response.status_code
        return
    for answer in _answers(body, parsed):
        if task == "feature-extraction":
            assert isinstance(answer, list) and len(answer) == 32 and all(isinstance(v, float) for v in answer)
        elif task == "token-classification":
            assert isinstance(answer, list)
            for entity in answer:
                assert entity["start"] <= entity["end"] and 0.0 <= entity["score"] <= 1.0
        else:
            labels = answer if isinstance(answer, list) else [answer]
            assert all(set(item) == {"label", "score"} for item in labels)
