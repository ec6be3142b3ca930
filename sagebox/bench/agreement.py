"""The serving engine against transformers, token for token, on a real model: fixed chat prompts each generated
greedily alone and inside a continuous batch of 8 that the prompts join one per step, beside transformers'
`generate()` on the same weights. A token that differs counts as a near-tie when transformers' two best logits at that
step are within 1e-3 of each other (float summation order may flip those); any other difference is a disagreement.
`scripts/bench_generation.py --agreement` runs it (issue 38's check for the demo model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

NEAR_TIE = 1e-3
PROMPTS = (
    "What is the capital of France?",
    "Name three primary colours.",
    "How many legs does a spider have?",
    "Write one sentence about the sea.",
    "What is two plus two?",
    "Give a synonym for happy.",
    "What does a bee make?",
    "Translate 'good morning' into French.",
    "Why is the sky blue? Answer briefly.",
    "List the days of the week.",
    "What is the boiling point of water in Celsius?",
    "Suggest a name for a pet cat.",
    "What colour is a ripe banana?",
    "Describe a bicycle in one sentence.",
    "What is the opposite of cold?",
    "Who wrote Romeo and Juliet?",
    "How many minutes are in an hour?",
    "What is the largest planet in our solar system?",
    "Give me a short tip for sleeping well.",
    "What season comes after winter?",
)


def _compare(ours: Sequence[int], theirs: Sequence[int], margins: Sequence[float]) -> str:
    """ "same", "near-tie" (the first difference where transformers' margin < NEAR_TIE) or "differs"."""
    for step, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return "near-tie" if margins[step] < NEAR_TIE else "differs"
    return "same" if len(ours) == len(theirs) else "differs"


def agreement(model_dir: Path, new_tokens: int = 32, threads: int = 2, batch: int = 8) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    from container.generation.model import load_generation_model
    from container.generation.request import Message
    from container.manifest import load_verified
    from sagebox.pipeline.gate.greedy import greedy_tokens

    torch.set_num_threads(threads)
    manifest = load_verified(model_dir)
    served = load_generation_model(model_dir, manifest)
    assert served.chat is not None
    prompts = [served.encode(served.chat.render((Message("user", p),)), add_special_tokens=False) for p in PROMPTS]
    reference = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    expected: list[tuple[list[int], list[float]]] = []
    for ids in prompts:
        with torch.inference_mode():
            out = reference.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.int64),
                max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, output_scores=True,
                return_dict_in_generate=True,
            )  # fmt: skip
        margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
        expected.append((out.sequences[0, len(ids) :].tolist(), margins))

    def run(slots: int, stagger: bool) -> list[list[int]]:
        return greedy_tokens(
            served.decoder, served.config, prompts, new_tokens, served.decode, served.special_ids,
            slots=slots, stagger=stagger, prefill_chunk=64,
        )  # fmt: skip

    alone, batched = run(1, False), run(batch, True)
    verdicts = {
        "alone": [_compare(got, *ref) for got, ref in zip(alone, expected, strict=True)],
        f"batch_of_{batch}": [_compare(got, *ref) for got, ref in zip(batched, expected, strict=True)],
    }
    return {
        "prompts": len(PROMPTS),
        "new_tokens": new_tokens,
        "near_tie": NEAR_TIE,
        **{name: {kind: v.count(kind) for kind in ("same", "near-tie", "differs")} for name, v in verdicts.items()},
    }
