"""Continuous batching: every generation's tokens are what it would get alone, whoever joins or leaves its batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch

from container.generation.decoder import Decoder, KVCache
from container.generation.engine import Engine, Job, new_job
from container.generation.events import EOS, LENGTH, STOP, Outcome, Token
from container.generation.request import Sampling
from container.generation.sampling import Sampler
from neuron_emu.llm.config import read_config
from tests.container.generation.tiny_decoders import VOCAB, engine_inputs, tiny_decoder

PROMPT_LENGTHS = (5, 60, 1, 23, 37, 8, 2, 17)


def _decode(ids: Sequence[int]) -> str:
    return "".join(f"<{i}>" for i in ids)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def llama() -> Any:
    return tiny_decoder("llama", seed=3)


def _engine(model: Any, slots: int = 4, chunk: int = 16, clock: FakeClock | None = None) -> Engine:
    raw, weights = engine_inputs(model)
    config = read_config(raw)
    return Engine(Decoder(config, weights), KVCache(config, slots, 128), clock or FakeClock(), prefill_chunk=chunk)


def _prompt(index: int, length: int) -> list[int]:
    generator = torch.Generator().manual_seed(1000 + index)
    return torch.randint(3, VOCAB, (length,), generator=generator).tolist()


class Collect:
    def __init__(self) -> None:
        self.tokens: list[Token] = []
        self.outcome: Outcome | None = None

    def job(self, prompt: list[int], sampling: Sampling, max_new: int, **kwargs: Any) -> Job:
        return new_job(
            prompt,
            Sampler(sampling),
            max_new,
            kwargs.pop("stops", ()),
            kwargs.pop("keep_stop", False),
            _decode,
            self.tokens.append,
            self._done,
            kwargs.pop("eos", frozenset()),
            **kwargs,
        )

    def _done(self, outcome: Outcome) -> None:
        assert self.outcome is None, "a generation ends once"
        if outcome.final_token is not None:  # the last token comes with the outcome
            assert outcome.tokens[-1] == outcome.final_token
            self.tokens.append(outcome.final_token)
        self.outcome = outcome


def _drain(engine: Engine, limit: int = 500) -> None:
    for _ in range(limit):
        if not engine.load:
            return
        engine.step()
    raise AssertionError("the engine did not finish")


def _alone(model: Any, prompt: list[int], max_new: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False, eos_token_id=None,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.int64),
        )  # fmt: skip
    return out[0, len(prompt) :].tolist()


def test_eight_generations_joining_at_different_steps_get_their_tokens_alone(llama: Any) -> None:
    engine = _engine(llama, slots=4, chunk=16)
    collectors = [Collect() for _ in PROMPT_LENGTHS]
    prompts = [_prompt(i, length) for i, length in enumerate(PROMPT_LENGTHS)]
    for step in range(200):
        if step < len(prompts):  # one arrives per step; only four fit at once, the rest wait for a slot
            engine.submit(collectors[step].job(prompts[step], Sampling(), 10 + step))
        if not engine.load:
            break
        engine.step()
    for i, collect in enumerate(collectors):
        assert collect.outcome is not None and collect.outcome.finish_reason == LENGTH
        assert [t.id for t in collect.tokens] == _alone(llama, prompts[i], 10 + i), f"generation {i}"
        assert (
            collect.outcome.text == "".join(t.text for t in collect.tokens) == _decode([t.id for t in collect.tokens])
        )
        assert collect.outcome.input_length == len(prompts[i])
    assert engine.steps < sum(10 + i for i in range(len(prompts)))  # steps were shared, not one stream at a time


def test_a_seeded_sampled_generation_is_the_same_alone_and_batched(llama: Any) -> None:
    sampling = Sampling(True, temperature=1.3, top_k=40, top_p=0.9, repetition_penalty=1.1, seed=77)
    prompt = _prompt(50, 12)
    alone = Collect()
    engine = _engine(llama)
    engine.submit(alone.job(prompt, sampling, 20))
    _drain(engine)
    batched = Collect()
    engine = _engine(llama)
    others = [Collect() for _ in range(3)]
    engine.submit(others[0].job(_prompt(51, 30), Sampling(True, seed=1), 25))
    engine.step()
    engine.submit(batched.job(prompt, sampling, 20))
    engine.submit(others[1].job(_prompt(52, 3), Sampling(), 5))
    engine.step()
    engine.submit(others[2].job(_prompt(53, 40), Sampling(True, seed=2), 30))
    _drain(engine)
    assert [t.id for t in batched.tokens] == [t.id for t in alone.tokens]
    assert alone.outcome is not None and alone.outcome.seed == 77


def test_eos_ends_a_generation_and_frees_its_slot(llama: Any) -> None:
    prompt = _prompt(60, 9)
    reference = _alone(llama, prompt, 8)
    eos = reference[3]
    first = reference.index(eos)
    collect = Collect()
    engine = _engine(llama, slots=1)
    engine.submit(collect.job(prompt, Sampling(), 8, eos=frozenset({eos})))
    waiting = Collect()
    engine.submit(waiting.job(_prompt(61, 4), Sampling(), 3))
    _drain(engine)
    assert collect.outcome is not None and collect.outcome.finish_reason == EOS
    assert [t.id for t in collect.tokens] == reference[: first + 1]
    assert collect.tokens[-1].special and collect.tokens[-1].text == ""
    assert waiting.outcome is not None and len(waiting.tokens) == 3  # it got the slot once the first ended


@pytest.mark.parametrize("keep", [False, True])
def test_a_stop_sequence_ends_the_text_where_it_occurs(llama: Any, keep: bool) -> None:
    prompt = _prompt(70, 6)
    reference = _alone(llama, prompt, 12)
    stop = f"<{reference[4]}><{reference[5]}>"
    collect = Collect()
    engine = _engine(llama)
    engine.submit(collect.job(prompt, Sampling(), 12, stops=[stop], keep_stop=keep))
    _drain(engine)
    full = _decode(reference)
    at = full.index(stop)
    assert collect.outcome is not None and collect.outcome.finish_reason == STOP
    assert collect.outcome.text == (full[: at + len(stop)] if keep else full[:at])
    assert "".join(t.text for t in collect.tokens) == collect.outcome.text


def test_the_deadline_ends_a_generation_with_the_tokens_so_far(llama: Any) -> None:
    clock = FakeClock()
    collect = Collect()
    engine = _engine(llama, clock=clock)
    engine.submit(collect.job(_prompt(80, 5), Sampling(), 50, deadline=2.5))
    for _ in range(3):
        engine.step()
        clock.now += 1.0
    engine.step()  # past the deadline: retired before the model runs
    assert collect.outcome is not None and collect.outcome.finish_reason == LENGTH
    assert len(collect.tokens) == 3 and not engine.load


def test_a_cancelled_generation_leaves_at_the_next_step_without_an_answer(llama: Any) -> None:
    engine = _engine(llama, slots=1)
    gone, next_in_line = Collect(), Collect()
    job = gone.job(_prompt(90, 5), Sampling(), 40)
    engine.submit(job)
    engine.submit(next_in_line.job(_prompt(91, 5), Sampling(), 2))
    engine.step()
    engine.step()
    engine.cancel(job)
    _drain(engine)
    assert gone.outcome is None and len(gone.tokens) == 2
    assert next_in_line.outcome is not None and len(next_in_line.tokens) == 2


def test_a_long_prompt_is_prefilled_in_chunks_while_a_running_stream_keeps_its_pace(llama: Any) -> None:
    engine = _engine(llama, chunk=16)
    running, long = Collect(), Collect()
    engine.submit(running.job(_prompt(100, 4), Sampling(), 30))
    engine.step()
    engine.submit(long.job(_prompt(101, 100), Sampling(), 2))
    for step in range(7):  # 100 prompt tokens in chunks of 16 take 7 steps
        before = len(running.tokens)
        engine.step()
        assert len(running.tokens) == before + 1, f"the running stream waited at step {step}"
        assert (len(long.tokens) == 0) == (step < 6)
    _drain(engine)


def test_a_job_that_cannot_fit_the_cache_is_refused_at_once(llama: Any) -> None:
    engine = _engine(llama)
    with pytest.raises(ValueError, match="exceed 128"):
        engine.submit(Collect().job(_prompt(110, 100), Sampling(), 29))


@pytest.mark.parametrize("kind", ["llama", "gpt2", "opt"])
def test_twenty_prompts_alone_and_eight_at_a_time_equal_transformers_token_for_token(kind: str) -> None:
    """Issue 38's check: 20 fixed prompts, each generated alone and inside a continuous batch of 8 joining at
    different steps, against transformers' greedy tokens; a difference may only come where transformers' top two
    logits are within 1e-3 of each other (a near-tie that float summation order can flip)."""
    model = tiny_decoder(kind, seed=11)
    prompts = [_prompt(200 + i, 1 + (i * 7) % 45) for i in range(20)]
    new = 12
    references = []
    for prompt in prompts:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt]), max_new_tokens=new, do_sample=False, eos_token_id=None, output_scores=True,
                return_dict_in_generate=True, attention_mask=torch.ones(1, len(prompt), dtype=torch.int64),
            )  # fmt: skip
        gaps = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
        references.append((out.sequences[0, len(prompt) :].tolist(), gaps))

    def near_ties(got: list[int], reference: tuple[list[int], list[float]]) -> int:
        tokens, gaps = reference
        for step, (ours, theirs) in enumerate(zip(got, tokens, strict=True)):
            if ours != theirs:
                assert gaps[step] < 1e-3, f"differs at step {step} where transformers' margin is {gaps[step]:.2e}"
                return 1
        return 0

    alone = []
    for prompt in prompts:
        engine = _engine(model, slots=1)
        collect = Collect()
        engine.submit(collect.job(prompt, Sampling(), new))
        _drain(engine)
        alone.append([t.id for t in collect.tokens])
    engine = _engine(model, slots=8, chunk=16)
    collectors = [Collect() for _ in prompts]
    for step in range(400):
        if step < len(prompts):  # one joins per step; eight run at once, the rest wait for a slot
            engine.submit(collectors[step].job(prompts[step], Sampling(), new))
        elif not engine.load:
            break
        engine.step()
    batched = [[t.id for t in c.tokens] for c in collectors]
    ties = sum(near_ties(got, ref) for got, ref in zip(alone, references, strict=True))
    ties += sum(near_ties(got, ref) for got, ref in zip(batched, references, strict=True))
    print(f"{kind}: 40 generations, {ties} near-tie difference(s)")
    assert ties <= 2  # at most a flip or two at a true near-tie; none seen on these seeds
