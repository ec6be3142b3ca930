"""Stop sequences over streamed text: release only text that cannot be the start of a stop sequence.

Text arrives in pieces (container/generation/detokenize.py); a stop sequence may arrive split over several. The
watcher holds back the longest tail of what it has that is a prefix of some stop sequence, so a client never receives
part of a stop sequence that then ends the answer. When one is complete, the answer ends there (TGI's stopping
criterion also stops at the first stop sequence the output ends with): TGI's answer keeps the stop
sequence (its `finish_reason` is "stop_sequence"), OpenAI's leaves it out ("The returned text will not contain the stop
sequence", https://platform.openai.com/docs/api-reference/chat/create#chat-create-stop); `keep_stop` chooses.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopWatcher:
    def __init__(self, stops: Sequence[str], keep_stop: bool) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._keep = keep_stop
        self._held = ""
        self.stopped: str | None = None  # the stop sequence that ended the answer

    def push(self, text: str) -> str:
        """The part of the text so far that can be released; after a stop, "" for ever."""
        if self.stopped is not None:
            return ""
        held = self._held + text
        # The answer ends where the first stop sequence ends (what checking after every character would find, so
        # the same text gives the same answer however it is split); of two ending there, the longer.
        hits = [(held.find(stop) + len(stop), -len(stop), stop) for stop in self._stops if stop in held]
        if hits:
            end, _, stop = min(hits)
            at = end - len(stop)
            self.stopped = stop
            self._held = ""
            return held[: at + len(stop)] if self._keep else held[:at]
        keep = self._partial(held)
        self._held = held[len(held) - keep :] if keep else ""
        return held[: len(held) - keep]

    def flush(self) -> str:
        """At the end of generation without a stop: the held text after all."""
        held, self._held = self._held, ""
        return "" if self.stopped is not None else held

    def _partial(self, text: str) -> int:
        """Length of the longest tail of `text` that is a proper prefix of a stop sequence."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest
