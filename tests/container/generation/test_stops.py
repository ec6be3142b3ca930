"""Stop sequences over streamed pieces: nothing of a stop sequence is released early, the answer ends at the first."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from container.generation.stops import StopWatcher


def _run(pieces: list[str], stops: list[str], keep: bool) -> tuple[list[str], str | None]:
    watcher = StopWatcher(stops, keep)
    released = [watcher.push(piece) for piece in pieces]
    released.append(watcher.flush())
    return released, watcher.stopped


def test_a_stop_split_over_pieces_is_held_back_then_cut() -> None:
    released, stopped = _run(["Hello, wor", "ld! ST", "OP and more"], ["STOP"], keep=False)
    assert released == ["Hello, wor", "ld! ", "", ""] and stopped == "STOP"
    released, stopped = _run(["Hello, wor", "ld! ST", "OP and more"], ["STOP"], keep=True)
    assert "".join(released) == "Hello, world! STOP" and stopped == "STOP"


def test_a_held_prefix_that_is_no_stop_is_released_later() -> None:
    released, stopped = _run(["go ST", "ART now"], ["STOP"], keep=False)
    assert released == ["go ", "START now", ""] and stopped is None
    released, stopped = _run(["tail S"], ["STOP"], keep=False)
    assert released == ["tail ", "S"] and stopped is None  # the end of generation releases what was held


def test_the_earliest_stop_wins_and_nothing_follows_it() -> None:
    watcher = StopWatcher(["\n\n", "User:"], keep_stop=False)
    assert watcher.push("Paris.\n\nUser: and") == "Paris."
    assert watcher.stopped == "\n\n"
    assert watcher.push("more") == "" and watcher.flush() == ""


def _expected(text: str, stops: list[str], keep: bool) -> str:
    """Checked character by character, as a generation would: the first point where the text ends with a stop."""
    for end in range(1, len(text) + 1):
        ending = sorted((stop for stop in stops if text[:end].endswith(stop)), key=len, reverse=True)
        if ending:
            return text[:end] if keep else text[: end - len(ending[0])]
    return text


def test_the_first_stop_to_complete_ends_the_answer_however_the_text_is_split() -> None:
    # "S" is complete at the second character, before "aSS" is (hypothesis found the split that disagreed).
    for pieces in (["aSS"], ["aS", "S"], ["a", "S", "S"]):
        released, stopped = _run(pieces, ["S", "aSS"], keep=False)
        assert "".join(released) == "a" and stopped == "S"


@given(
    st.text(alphabet="abS", max_size=30),
    st.lists(st.integers(min_value=0, max_value=30), max_size=8),
    st.lists(st.text(alphabet="abS", min_size=1, max_size=4), min_size=1, max_size=3),
    st.booleans(),
)
def test_any_split_releases_exactly_the_text_up_to_the_first_stop(
    text: str, cuts: list[int], stops: list[str], keep: bool
) -> None:
    bounds = sorted({0, len(text), *(min(cut, len(text)) for cut in cuts)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    released, _ = _run(pieces, stops, keep)
    answer = _expected(text, stops, keep)
    assert "".join(released) == answer
    shown = ""
    for part in released:  # no prefix of the stream ever runs past the answer
        shown += part
        assert answer.startswith(shown)
