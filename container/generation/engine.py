"""Continuous batching at the iteration level: one model step at a time over every running generation.

A generation joins the running batch at the next step after it arrives (when a cache slot is free) and leaves it
the step it finishes, freeing its slot for the next in line. Each step decodes one token for every sequence whose
prompt is in, and spends at most `prefill_chunk` tokens prefilling prompts (oldest first, in bounded chunks), so a
long prompt never stalls the streams already running for longer than one chunk takes. A sequence ends at its EOS
token, its `max_new_tokens`, a stop sequence, its deadline (the tokens so far, finish_reason "length"), or when its
client goes (`cancel`: the slot is free at the next step).

The engine is pure scheduling over a model step (the CPU `Decoder`, or a decoder compiled for NeuronCores:
container/generation/neuron.py) and its slots (a `KVCache`, or the compiled decoder's batch lines): `step()` runs one
iteration on the caller's thread (the tests drive it directly); `run()` is the inference thread's loop. Callbacks run
on that thread; the service hands their events to the event loop (container/generation/service.py).

With `whole_prompts` (a compiled decoder, whose context-encoding graph takes a prompt at once and cannot continue
one) a prompt is never split: the step's prefill budget admits prompts whole, oldest first, and a prompt longer than
the budget goes in alone, as the step's first.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from container.generation.decoder import Segment
from container.generation.detokenize import Decode, Detokenizer
from container.generation.events import EOS, LENGTH, STOP, Outcome, Token
from container.generation.sampling import Sampler
from container.generation.stops import StopWatcher

log = logging.getLogger("sagebox.server")


class Slots(Protocol):
    """The sequences a model step holds at once, and how long each may grow."""

    @property
    def slots(self) -> int: ...

    @property
    def max_len(self) -> int: ...


class StepModel(Protocol):
    def forward(self, tokens: torch.Tensor, segments: Sequence[Segment], cache: Any) -> torch.Tensor:
        """Logits [len(segments), vocab] of each segment's last token; the segments' keys and values are cached."""
        ...


@dataclass
class Job:
    """One generation: its prompt and limits in, its tokens out through `on_token` and `on_done`."""

    prompt: Sequence[int]
    sampler: Sampler
    max_new_tokens: int
    stops: StopWatcher
    detokenizer: Detokenizer
    on_token: Callable[[Token], None]
    on_done: Callable[[Outcome], None]
    deadline: float | None = None  # on the engine's clock; past it the answer is the tokens so far
    eos: frozenset[int] = frozenset()
    on_failed: Callable[[str], None] | None = None  # the model raised: the generation ends with this reason
    # state, the engine's own
    slot: int = -1
    prefilled: int = 0
    generated: list[int] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)
    text: str = ""
    cancelled: bool = False
    finished: bool = False

    @property
    def cached(self) -> int:
        """Tokens of this sequence in the cache."""
        return self.prefilled + max(0, len(self.generated) - 1)


class Engine:
    def __init__(
        self,
        decoder: StepModel,
        cache: Slots,
        clock: Callable[[], float],
        special_ids: frozenset[int] = frozenset(),
        prefill_chunk: int = 256,
        whole_prompts: bool = False,
    ) -> None:
        self.decoder = decoder
        self.cache = cache
        self.clock = clock
        self.special_ids = special_ids
        self.prefill_chunk = prefill_chunk
        self.whole_prompts = whole_prompts
        self.waiting: collections.deque[Job] = collections.deque()
        self.running: list[Job] = []
        self._free = list(range(cache.slots - 1, -1, -1))
        self._wake = threading.Condition()
        self._closed = False
        self.steps = 0
        self.tokens_out = 0

    # --- from any thread ---------------------------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        if len(job.prompt) + job.max_new_tokens > self.cache.max_len:
            raise ValueError(f"{len(job.prompt)} prompt + {job.max_new_tokens} new tokens exceed {self.cache.max_len}")
        with self._wake:
            self.waiting.append(job)
            self._wake.notify()

    def cancel(self, job: Job) -> None:
        """The client went: the sequence stops at the next step, without calling back."""
        job.cancelled = True
        with self._wake:
            self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()

    @property
    def load(self) -> int:
        """Generations waiting or running."""
        return len(self.waiting) + len(self.running)

    # --- the inference thread ----------------------------------------------------------------------------------------

    def run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self.waiting and not self.running:
                    self._wake.wait()
                if self._closed:
                    return
            try:
                self.step()
            except Exception as exc:  # a model failure ends what it touched, never the thread
                log.exception("generation step failed")
                self._fail_all(f"the model failed: {type(exc).__name__}: {exc}")

    def _fail_all(self, reason: str) -> None:
        with self._wake:
            jobs = [*self.running, *self.waiting]
            self.waiting.clear()
        for job in jobs:
            self._retire(job)
            job.finished = True
            if job.on_failed is not None and not job.cancelled:
                job.on_failed(reason)

    def step(self) -> None:
        """One iteration: retire what ended, admit into free slots, prefill a chunk, decode one token each."""
        now = self.clock()
        for job in list(self.running):
            if job.cancelled:
                self._retire(job)
            elif job.deadline is not None and now >= job.deadline:
                self._finish(job, LENGTH)
        with self._wake:
            self.waiting = collections.deque(job for job in self.waiting if not job.cancelled)
            while self.waiting and self._free:
                job = self.waiting.popleft()
                job.slot = self._free.pop()
                self.running.append(job)
        tokens: list[int] = []
        segments: list[Segment] = []
        producing: list[Job | None] = []  # per segment: the job whose next token its logits give
        budget = self.prefill_chunk
        for job in self.running:
            if job.prefilled < len(job.prompt):
                if budget <= 0:
                    continue
                if self.whole_prompts:
                    if len(job.prompt) > budget and budget < self.prefill_chunk:
                        continue  # it goes in whole at a later step, first in line
                    budget = max(budget, len(job.prompt))
                chunk = list(job.prompt[job.prefilled : job.prefilled + budget])
                segments.append(Segment(job.slot, job.prefilled, len(chunk)))
                tokens += chunk
                job.prefilled += len(chunk)
                budget -= len(chunk)
                producing.append(job if job.prefilled == len(job.prompt) else None)
            else:
                segments.append(Segment(job.slot, job.cached, 1))
                tokens.append(job.generated[-1])
                producing.append(job)
        if not segments:
            return
        logits = self.decoder.forward(torch.tensor(tokens, dtype=torch.int64), segments, self.cache)
        self.steps += 1
        for row, owner in enumerate(producing):
            if owner is None:
                continue
            # The history is built only for a request that reads it (a repetition penalty): it grows with the
            # prompt, and every step of every sequence would otherwise copy it.
            seen = torch.tensor(
                [*owner.prompt, *owner.generated] if owner.sampler.uses_history else [], dtype=torch.int64
            )
            choice = owner.sampler.choose(logits[row], seen)
            self._emit(owner, choice.token, choice.logprob)

    # --- a sequence's end --------------------------------------------------------------------------------------------

    def _emit(self, job: Job, token: int, logprob: float) -> None:
        job.generated.append(token)
        self.tokens_out += 1
        finish: str | None = None
        special = token in self.special_ids or token in job.eos
        released = job.stops.push("" if special else job.detokenizer.push(token))
        if job.stops.stopped is not None:
            finish = STOP
        elif token in job.eos or len(job.generated) >= job.max_new_tokens:
            finish = EOS if token in job.eos else LENGTH
            released += self._tail(job)  # what the detokenizer and the stop watcher still hold
            if job.stops.stopped is not None:
                finish = STOP
        # The last token carries the held text with it; an EOS token that releases text is not skipped by clients
        # that drop special tokens' text. It is delivered with the outcome, not on its own.
        chosen = Token(token, released, logprob, special and not released)
        job.tokens.append(chosen)
        job.text += chosen.text
        if finish is None:
            job.on_token(chosen)
        else:
            self._finish(job, finish, chosen)

    def _tail(self, job: Job) -> str:
        return job.stops.push(job.detokenizer.flush()) + job.stops.flush()

    def _finish(self, job: Job, reason: str, final: Token | None = None) -> None:
        """The sequence leaves the batch. At a deadline no token carries the held text: it is in `Outcome.text` alone
        (the service streams what the tokens did not)."""
        if final is None:
            job.text += self._tail(job)
        job.finished = True
        self._retire(job)
        job.on_done(Outcome(job.text, reason, tuple(job.tokens), len(job.prompt), job.sampler.seed, final))

    def _retire(self, job: Job) -> None:
        if job in self.running:
            self.running.remove(job)
            self._free.append(job.slot)


def new_job(
    prompt: Sequence[int],
    sampler: Sampler,
    max_new_tokens: int,
    stops: Sequence[str],
    keep_stop: bool,
    decode: Decode,
    on_token: Callable[[Token], None],
    on_done: Callable[[Outcome], None],
    eos: frozenset[int],
    deadline: float | None = None,
    on_failed: Callable[[str], None] | None = None,
) -> Job:
    return Job(
        list(prompt),
        sampler,
        max_new_tokens,
        StopWatcher(stops, keep_stop),
        Detokenizer(decode, prompt),
        on_token,
        on_done,
        deadline,
        eos,
        on_failed,
    )
