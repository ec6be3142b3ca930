"""A chat's messages rendered into a prompt with the model's own chat template, as transformers renders it.

transformers' `apply_chat_template` runs the tokenizer's Jinja template in jinja2's immutable sandbox with
`trim_blocks` and `lstrip_blocks`, the loop-controls extension, `raise_exception` and `strftime_now` as globals, and
passes `messages`, `add_generation_prompt` and the tokenizer's special tokens (`bos_token`, `eos_token`, ...). The
same here, so a model answers a chat served by Sagebox as it does in transformers. A template that raises refuses the
chat (400) with its own message (many templates raise on roles out of order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from container.generation.request import Message
from container.tasks.base import BadInput


class ChatTemplate:
    def __init__(self, source: str, special_tokens: Mapping[str, str]) -> None:
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise BadInput(f"the model's chat template refused the messages: {message}")

        def strftime_now(fmt: str) -> str:
            return datetime.now().strftime(fmt)

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        environment.globals["raise_exception"] = raise_exception
        environment.globals["strftime_now"] = strftime_now
        self._template = environment.from_string(source)
        self._special = dict(special_tokens)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        from jinja2 import TemplateError

        chat: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in messages]
        try:
            return self._template.render(messages=chat, add_generation_prompt=add_generation_prompt, **self._special)
        except TemplateError as exc:
            raise BadInput(f"the model's chat template failed on these messages: {exc}") from None
