"""The generation benchmark's pure parts (events timed from byte pieces split anywhere, token counts, percentiles,
aggregate throughput, costs, RSS), on made-up clocks; and one small run of the whole benchmark on a tiny model."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from sagebox.bench import generation as bench
from sagebox.bench.cost import cost_per_million
from sagebox.bench.faults.procfs import parse_vm_rss_kib


def _sse(event: Any) -> bytes:
    return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def _chunk(content: str | None, role: bool = False, finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _usage(completion: int) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [], "usage": {"completion_tokens": completion}}


def _tgi(index: int, text: str, last: dict[str, Any] | None = None, special: bool = False) -> dict[str, Any]:
    token = {"id": index, "text": text, "logprob": -0.5, "special": special}
    return {"index": index, "token": token, "generated_text": None, "details": last}


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


CHAT_STREAM = b"".join(
    [
        _sse(_chunk("", role=True)),
        _sse(_chunk("Un")),
        _sse(_chunk(" robot ")),
        _sse(_chunk("peint é")),  # a two-byte character the pieces below cut in half
        _sse(_chunk("👍")),
        _sse(_chunk(None, finish="length")),
        _sse(_usage(7)),
        b"data: [DONE]\n\n",
    ]
)


def test_chat_events_are_timed_when_their_last_byte_arrives_whatever_the_pieces() -> None:
    accent = CHAT_STREAM.index("é".encode())
    thumb = CHAT_STREAM.index("👍".encode())
    cuts = [3, 40, accent + 1, thumb + 2, thumb + 3, len(CHAT_STREAM) - 4]
    pieces = _split(CHAT_STREAM, cuts)
    arrivals = [10.0 + 0.1 * i for i in range(len(pieces))]
    result = bench.read_stream(10.0, zip(arrivals, pieces, strict=True))
    assert result.ok and result.error == ""
    assert result.text == "Un robot peint é👍"
    assert result.tokens == 7  # the server's count (usage), not the 4 chunks with text
    # Each chunk with text is timed at the piece that completed it; the role-only first chunk is no token.
    markers = (b'"Un"', b'" robot "', "peint é".encode(), "👍".encode())
    ends = [CHAT_STREAM.index(b"\n\n", CHAT_STREAM.index(marker)) + 1 for marker in markers]  # each event's last byte
    expected = [next(i for i, edge in enumerate([*cuts, len(CHAT_STREAM)]) if edge > end) for end in ends]
    assert result.token_times == pytest.approx(tuple(0.1 * i for i in expected))
    assert result.end == pytest.approx(0.1 * (len(pieces) - 1))
    assert result.gaps == pytest.approx([b - a for a, b in itertools.pairwise(result.token_times)])


def test_every_split_point_gives_the_same_events() -> None:
    whole = bench.read_stream(0.0, [(1.0, CHAT_STREAM)])
    for cut in range(1, len(CHAT_STREAM)):
        result = bench.read_stream(0.0, [(1.0, CHAT_STREAM[:cut]), (1.0, CHAT_STREAM[cut:])])
        assert (result.text, result.tokens, len(result.token_times)) == (whole.text, 7, 4), cut


def test_tgi_events_count_every_token_even_one_whose_text_is_held() -> None:
    last = {"finish_reason": "eos_token", "generated_tokens": 4, "seed": None, "input_length": 3}
    events = [_tgi(0, "Hel"), _tgi(1, ""), _tgi(2, "lo"), _tgi(3, "", last, special=True)]
    stream = [(float(i + 1), _sse(e)) for i, e in enumerate(events)]
    result = bench.read_stream(0.0, stream)
    assert result.token_times == (1.0, 2.0, 3.0, 4.0)
    assert (result.tokens, result.text, result.ttft) == (4, "Hello", 1.0)


def test_an_error_event_or_a_non_200_fails_the_stream() -> None:
    broken = bench.read_stream(0.0, [(1.0, _sse(_chunk("a"))), (2.0, _sse({"error": "boom", "error_type": "x"}))])
    assert broken.error == "boom" and not broken.ok and broken.end == 2.0
    assert not bench.StreamResult(503, 0.0, (), 0.1, 0, "", "busy").ok
    silent = bench.read_stream(0.0, [(1.0, _sse(_chunk("", role=True))), (2.0, b"data: [DONE]\n\n")])
    assert not silent.ok and silent.tokens == 0


def test_a_stream_cut_off_without_its_blank_line_keeps_its_last_event() -> None:
    result = bench.read_stream(0.0, [(1.0, _sse(_chunk("a"))), (2.0, b'data: {"usage": {"completion_tokens": 3}}')])
    assert result.tokens == 3 and result.end == 2.0


def test_token_counts_prefer_the_servers_own() -> None:
    chunks = [_chunk("", role=True), _chunk("a"), _chunk(""), _chunk("b")]
    assert bench.count_tokens(chunks) == 2  # no usage: chunks with text, a lower bound
    assert bench.count_tokens([*chunks, _usage(5)]) == 5
    tgi = [_tgi(0, "x"), _tgi(1, "")]
    assert bench.count_tokens(tgi) == 2
    assert bench.count_tokens([*tgi, _tgi(2, "", {"generated_tokens": 9})]) == 9
    assert bench.count_tokens([]) == 0


def test_millisecond_summaries_interpolate_between_ranks() -> None:
    summary = bench.ms_summary([0.05, 0.01, 0.03, 0.02, 0.04])
    assert summary == {"n": 5, "p50_ms": 30.0, "p90_ms": 46.0, "mean_ms": 30.0, "min_ms": 10.0, "max_ms": 50.0}
    assert bench.ms_summary([]) is None
    assert bench.ms_summary([0.2])["p90_ms"] == 200.0  # type: ignore[index]


def _result(sent: float, times: list[float], tokens: int, status: int = 200) -> bench.StreamResult:
    return bench.StreamResult(status, sent, tuple(times), times[-1] if times else 0.5, tokens, "x")


def test_concurrent_streams_aggregate_tokens_over_the_whole_window() -> None:
    results = [
        _result(100.0, [0.5, 0.6, 0.8, 1.0], 4),
        _result(100.2, [1.0, 1.5, 2.0, 2.8], 6),  # ends last: 100.2 + 2.8 = 103.0
        _result(100.1, [], 0, status=503),
    ]
    summary = bench.concurrent_summary(results)
    assert (summary["streams"], summary["failed"], summary["tokens"]) == (3, 1, 10)
    assert summary["wall_s"] == pytest.approx(3.0)
    assert summary["aggregate_tokens_per_s"] == pytest.approx(10 / 3.0, abs=0.01)
    # decode alone: both streams past their first token (101.2) and neither ended (101.0): no such window here
    assert summary["decode_tokens_per_s"] == 0.0
    steady = bench.concurrent_summary([_result(0.0, [0.1, 0.3, 0.5, 0.7, 0.9], 5), _result(0.0, [0.2, 0.4, 0.6], 3)])
    # window (0.2, 0.6]: 0.3 and 0.5 of the first stream, 0.4 and 0.6 of the second: 4 events in 0.4 s
    assert steady["decode_tokens_per_s"] == pytest.approx(10.0)
    assert summary["ttft"]["p50_ms"] == pytest.approx(750.0)
    # gaps: 100, 200, 200 ms and 500, 500, 800 ms, pooled
    assert summary["inter_token"]["p50_ms"] == pytest.approx(350.0)
    assert summary["inter_token"]["max_ms"] == pytest.approx(800.0)
    assert [row["tokens"] for row in summary["per_stream"]] == [4, 6, 0]
    assert summary["per_stream"][0]["itl_p50_ms"] == pytest.approx(200.0)


def test_one_stream_runs_take_the_median_run() -> None:
    runs = [_result(0.0, [0.2, 0.3, 1.0], 10), _result(5.0, [0.1, 0.2, 0.5], 10), _result(9.0, [0.3, 0.4, 2.0], 10)]
    summary = bench.sequential_summary(runs)
    assert summary["ttft_ms"] == pytest.approx(200.0)
    assert summary["tokens_per_s"] == pytest.approx(10.0)  # 10 tokens over 1.0 s, the median of 20, 10 and 5
    assert summary["inter_token"]["n"] == 6
    assert bench.sequential_summary([_result(0.0, [], 0, status=503)])["failed"] == 1


def test_generate_rows_count_up_to_their_first_eos() -> None:
    assert bench.generated_count([5, 6, 2, 2, 2], (2,)) == 3
    assert bench.generated_count([5, 6, 7], (2,)) == 3
    assert bench.generated_count([9, 5], (2, 9)) == 1


def test_costs_price_output_tokens_per_second() -> None:
    rows = bench.cost_rows(50.0, {"ml.c6i.2xlarge": 0.408, "ml.inf2.xlarge": 0.99})
    assert rows["ml.c6i.2xlarge"] == pytest.approx(cost_per_million(0.408, 50.0), abs=1e-4)
    assert rows["ml.c6i.2xlarge"] == pytest.approx(0.408 * 1_000_000 / (50.0 * 3600), abs=1e-4)
    assert bench.cost_rows(0.0, {"ml.c6i.2xlarge": 0.408}) == {}


def test_rss_of_a_process_tree_from_proc(tmp_path: Path) -> None:
    def process(pid: int, kib: int | None, children: list[int]) -> None:
        (tmp_path / str(pid) / "task" / str(pid)).mkdir(parents=True)
        rss = f"VmRSS:\t  {kib} kB\n" if kib is not None else ""
        (tmp_path / str(pid) / "status").write_text(f"Name:\tpython\n{rss}Threads:\t3\n")
        (tmp_path / str(pid) / "task" / str(pid) / "children").write_text(" ".join(map(str, children)))

    process(10, 1000, [11, 12])
    process(11, 200, [])
    process(12, None, [])  # a zombie has no VmRSS
    assert bench.tree_rss(10, tmp_path) == 1200 * 1024
    assert bench.tree_rss(99, tmp_path) == 0  # gone
    assert parse_vm_rss_kib("VmRSS:\t 42 kB\n") * 1024 == 42 * 1024  # the reading tree_rss sums


def test_the_long_prompt_repeats_the_paragraph_within_the_budget() -> None:
    def words(text: str) -> int:
        return len(text.split())

    text = bench.repeat_to_tokens("one two three. ", 10, words)
    assert words(text) == 9
    assert bench.repeat_to_tokens("one two three. ", 2, words) == "one two three. "  # at least once


def test_stream_counts_parse_from_a_comma_list() -> None:
    assert bench.parse_args(["--streams", "4,16"]).streams == (4, 16)
    with pytest.raises(SystemExit):
        bench.parse_args(["--streams", "0"])


def test_a_model_that_is_not_there_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--model", str(tmp_path / "no" / "such-model"), "--out", str(tmp_path / "out.json")]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("bench_generation: error: ") and "such-model" in line
    assert not (tmp_path / "out.json").exists()


@pytest.mark.slow
def test_a_small_run_end_to_end_on_a_tiny_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.container.generation.model_dir import write_model_dir

    model_dir = write_model_dir(tmp_path / "model", "llama", context=1024)
    out = tmp_path / "generation.json"
    small = ["--new-tokens", "8", "--streams", "3", "--single-runs", "2", "--threads", "1"]
    overload = ["--overload", "--overload-requests", "6", "--overload-prompt-tokens", "600"]
    limits = ["MAX_TOTAL_TOKENS=1024", "MAX_BATCH_TOTAL_TOKENS=2048", "MAX_CONCURRENT_REQUESTS=2"]
    envs = [arg for limit in limits for arg in ("--overload-env", limit)]
    assert bench.main(["--model", str(model_dir), "--out", str(out), *small, *overload, *envs]) == 0
    report = json.loads(out.read_text())
    server = report["server"]
    assert server["one_stream"]["runs"] == 2 and server["streams_3"]["streams"] == 3
    assert server["streams_3"]["tokens"] == sum(row["tokens"] for row in server["streams_3"]["per_stream"])
    assert server["ratio_3_streams_over_one"] == pytest.approx(
        server["streams_3"]["aggregate_tokens_per_s"] / server["one_stream"]["tokens_per_s"], rel=0.01
    )
    assert report["transformers"]["same_text_as_server_at_batch_1"] is True  # the same greedy tokens
    assert set(report["transformers"]) >= {"batch_1", "batch_3"}
    assert set(report["cost"]["usd_per_million_output_tokens"]["3_streams"]) >= {"ml.c6i.2xlarge"}
    o = report["overload"]
    assert o["answered"] + o["refused_503"] == 6 and o["answered"] >= 2 and o["other_failures"] == 0
    assert o["server_stats"]["slots"] == 2 and 300 < o["prompt_tokens"] <= 600
    assert o["rss_mib"]["peak"] >= o["rss_mib"]["before"] > 0
    assert o["lone_request_before"]["ok"] == o["lone_request_after"]["ok"] == 5
    assert {"model", "flags", "usable_cpus"} <= set(report["machine"])
    printed = capsys.readouterr().out
    assert "server, 3 streams" in printed and "transformers, batch 3" in printed and "NOT a measurement" in printed
