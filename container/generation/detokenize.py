"""Token ids to text as they are generated, never splitting a character or a word's leading space.

A byte-level BPE token can hold part of a UTF-8 character, and SentencePiece tokenizers drop the leading space of
the first token they decode. So each new token is decoded together with a few tokens before it, and only the text
that grew past what those decoded to is released; text ending in U+FFFD (an incomplete character) is held until the
next token completes it. This is what TGI does (text_generation_server's `Model.decode_token`). The answer of a
non-streamed request is the same concatenation, so a streamed answer always equals the non-streamed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Decode = Callable[[Sequence[int]], str]
CONTEXT_TOKENS = 5  # prompt tokens decoded before the first generated one (TGI: prefix_offset = len(prompt) - 5)


class Detokenizer:
    def __init__(self, decode: Decode, prompt_ids: Sequence[int]) -> None:
        self._decode = decode
        context = list(prompt_ids[-CONTEXT_TOKENS:])
        self._ids = context
        self._prefix = 0  # where the text already released starts being decoded from
        self._read = len(context)  # ids before this are released
        self.text = ""  # everything released so far

    def push(self, token: int) -> str:
        """The text this token releases ("" while a character is incomplete)."""
        self._ids.append(token)
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            piece = after[len(before) :]
            self._prefix, self._read = self._read, len(self._ids)
            self.text += piece
            return piece
        return ""

    def flush(self) -> str:
        """At the end: whatever is still held (an incomplete character decodes as U+FFFD, as it would unstreamed)."""
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        piece = after[len(before) :] if len(after) > len(before) else ""
        self._prefix = self._read = len(self._ids)
        self.text += piece
        return piece
