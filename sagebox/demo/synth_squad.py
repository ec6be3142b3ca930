"""A generator of labelled SQuAD-format QA data: short made-up paragraphs of many kinds with answer spans.

Each paragraph comes from one domain (a biography, a company note, a match report, a recipe, a bus notice, a
forecast, ...; see synth_relations.py) and states three to six facts about a shared cast, so most answers have
distractors of the same type nearby (other people, dates, prices, temperatures). Entities are named in full first
and often shorter later (a surname, a firm's short name, a pronoun). Questions come in several wordings, many of
them sharing few words with the sentence that holds the answer; the dev split also asks wordings training never
sees, and draws names from word-list items training never uses (synth_values.split_items). Everything is
deterministic from the seed.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from sagebox.demo.synth_relations import ALL_RELATIONS, FILLERS, PEOPLE, Relation
from sagebox.demo.synth_values import Value, is_entity, make_value
from sagebox.pipeline.data.squad import GoldAnswer, QAExample

__all__ = ["BIOGRAPHY", "RELATIONS", "Relation", "generate"]

RELATIONS: tuple[Relation, ...] = ALL_RELATIONS
# Short-answer biography facts (birth, profession, studies, marriage): tests use them for near-tie-free spans.
_SHORT_KINDS = {"person", "town", "year", "profession", "subject", "org"}
BIOGRAPHY: tuple[Relation, ...] = tuple(r for r in PEOPLE if set(r.slots.values()) <= _SHORT_KINDS)
_FILLERS: tuple[str, ...] = FILLERS

_PRONOUN_FORMS = ("pron", "Pron", "pos", "Pos", "obj")
_SHORT_FORMS = ("last", "short")
_ANSWER_FORMS = ("", "Cap", "first", *_SHORT_FORMS)  # forms that are the value itself (an answer can be one)


def _fields(template: str) -> list[tuple[str, str | None, str]]:
    """(literal, slot, form) triples of a template; `{p.last}` is slot p, form last."""
    parts: list[tuple[str, str | None, str]] = []
    for literal, name, _, _ in string.Formatter().parse(template):
        if name is None:
            parts.append((literal, None, ""))
        else:
            slot, _, form = name.partition(".")
            parts.append((literal, slot, form))
    return parts


def _uses_pronoun(template: str, slot: str) -> bool:
    return any(s == slot and form in _PRONOUN_FORMS for _, s, form in _fields(template))


def _stands_alone(template: str, relation: Relation) -> bool:
    """False for a sentence that names its subject only by a pronoun or not at all ("It winters in ..."), where
    other wordings name it: such a sentence may only follow one about the same subject."""
    subject = relation.subject
    if not any(_mentions(t, subject) for t in relation.sentences):
        return True
    return any(s == subject and form not in _PRONOUN_FORMS for _, s, form in _fields(template))


def _mentions(template: str, slot: str) -> bool:
    return any(s == slot for _, s, _ in _fields(template))


def _surface(value: Value, form: str, shorten: bool) -> str:
    if form == "Cap":
        text = value.forms.get("Cap") or value.text
        return text[:1].upper() + text[1:]
    if form:
        return value.form(form)
    if shorten:
        for name in _SHORT_FORMS:
            if value.forms.get(name):
                return value.forms[name]
    return value.text


def _render(
    template: str,
    values: dict[str, Value],
    rng: random.Random | None = None,
    mentioned: set[str] | None = None,
    shorten_p: float = 0.5,
    suffixes: bool = False,
) -> tuple[str, dict[str, tuple[int, int]]]:
    """The template filled in, and each slot's (start, end) at its first place in the text.

    With `rng` and `mentioned`, an entity already named in the paragraph is often named by its short form. A slot
    whose value has a "number" form also gets the span `slot.number` (the figure without its unit); `suffixes`
    writes each value's suffix (a unit conversion) after it, outside its span."""
    out: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    cursor = 0
    for literal, slot, form in _fields(template):
        out.append(literal)
        cursor += len(literal)
        if slot is None:
            continue
        value = values[slot]
        shorten = rng is not None and mentioned is not None and value.text in mentioned and rng.random() < shorten_p
        text = _surface(value, form, shorten)
        if form in _ANSWER_FORMS and slot not in spans:
            spans[slot] = (cursor, cursor + len(text))
            number = value.forms.get("number", "")
            if not form and number and text.startswith(number):
                spans[f"{slot}.number"] = (cursor, cursor + len(number))
        if suffixes and not form and value.suffix:
            text += value.suffix
        out.append(text)
        cursor += len(text)
    return "".join(out), spans


@dataclass(frozen=True)
class _Fact:
    text: str
    spans: dict[str, tuple[int, int]]  # slot -> (start, end) within text
    values: dict[str, Value]
    relation: Relation
    named: frozenset[str]  # slots the sentence names in any form, a pronoun included


def _asks_about_subject(relation: Relation) -> bool:
    """True when every question names the subject, so the relation can be stated twice about two entities."""
    templates = [t for t, _ in relation.questions + relation.dev_questions]
    return is_entity(relation.slots[relation.subject]) and all(_mentions(t, relation.subject) for t in templates)


def _paragraph(
    rng: random.Random, relations: tuple[Relation, ...], split: str, weights: list[float] | None = None
) -> list[_Fact]:
    """Three to six facts about a shared cast, so every paragraph has same-kind distractors."""
    cast: dict[str, list[Value]] = {}
    taken: set[str] = set()  # every value text used so far: no two slots share a surface string
    facts: list[_Fact] = []
    used: set[tuple[int, str]] = set()
    mentioned: set[str] = set()
    previous_subject = ""
    target = rng.randint(3, 6)
    for _ in range(target * 3):
        if len(facts) == target:
            break
        index = rng.choices(range(len(relations)), weights)[0] if weights else rng.randrange(len(relations))
        relation = relations[index]
        values: dict[str, Value] = {}
        for slot, kind in relation.slots.items():
            pool = cast.setdefault(kind, [])
            reuse_p = 0.65 if slot == relation.subject else 0.35
            candidates = [v for v in pool if v.text not in {x.text for x in values.values()}]
            if is_entity(kind) and candidates and rng.random() < reuse_p:
                value = rng.choice(candidates)
            else:
                value = make_value(kind, rng, split)
                for _ in range(20):
                    if value.text not in taken and value.text not in {v.text for v in values.values()}:
                        break
                    value = make_value(kind, rng, split)
                else:
                    break
            values[slot] = value
        if len(values) < len(relation.slots):
            continue
        # A relation is stated once per subject (or once per paragraph when its questions do not name the
        # subject), so every question has exactly one answer.
        key = (index, values[relation.subject].text if _asks_about_subject(relation) else "")
        if key in used:
            continue
        subject = values[relation.subject].text
        templates = [
            t for t in relation.sentences if _stands_alone(t, relation) or (previous_subject == subject and facts)
        ]
        if not templates:
            continue
        used.add(key)
        for slot, value in values.items():
            taken.add(value.text)
            pool = cast.setdefault(relation.slots[slot], [])
            if value not in pool:
                pool.append(value)
        template = rng.choice(templates)
        text, spans = _render(template, values, rng, mentioned, suffixes=True)
        named = frozenset(slot for _, slot, _ in _fields(template) if slot is not None)
        facts.append(_Fact(text, spans, values, relation, named))
        mentioned |= {v.text for s, v in values.items() if is_entity(relation.slots[s]) and s in spans}
        previous_subject = subject
    return facts


COMMON_SHARE = 0.25  # of a paragraph's facts, on average, from relations of no particular domain
# Contexts made of two paragraphs (~200 tokens instead of ~100): served contexts are often that long, and a model
# trained on short ones only answers long ones worse (measured: tuning-set F1 70.6 on its paragraphs, 57.7 on the
# same questions with another paragraph put before each).
LONG_SHARE = 0.3


def _domains(relations: tuple[Relation, ...]) -> list[tuple[tuple[Relation, ...], list[float]]]:
    """Each domain's relations with the common ones mixed in, and the weights to draw them by."""
    grouped: dict[str, list[Relation]] = {}
    for relation in relations:
        grouped.setdefault(relation.domain, []).append(relation)
    common = grouped.pop("common", []) if len(grouped) > 1 else []
    out = []
    for group in grouped.values():
        share = COMMON_SHARE if common else 0.0
        weights = [(1 - share) / len(group)] * len(group) + [share / max(1, len(common))] * len(common)
        out.append((tuple(group + common), weights))
    return out


def _question(rng: random.Random, fact: _Fact, split: str) -> tuple[str, str] | None:
    wordings = list(fact.relation.questions)
    if split == "dev":
        wordings += list(fact.relation.dev_questions) * 2
    usable = [
        (t, slot)
        for t, slot in wordings
        if slot in fact.spans and all(s in fact.named for _, s, _ in _fields(t) if s is not None)
    ]
    if not usable:
        return None
    template, answer_slot = rng.choice(usable)
    question, _ = _render(template, fact.values, rng, {v.text for v in fact.values.values()}, 0.25)
    return question, answer_slot


def generate(
    n_questions: int, seed: int, split: str = "train", relations: tuple[Relation, ...] = RELATIONS
) -> list[QAExample]:
    """`n_questions` labelled questions; split "dev" also draws the wordings and names reserved for it."""
    rng = random.Random(f"{split}:{seed}")
    domains = _domains(relations)
    domain_weights = [len(group) ** 0.5 for group, _ in domains]
    examples: list[QAExample] = []
    article = 0
    while len(examples) < n_questions:
        choice = rng.choices(range(len(domains)), domain_weights)[0]
        group, weights = domains[choice]
        facts = _paragraph(rng, group, split, weights)
        if not facts:
            continue
        pieces: list[tuple[str, _Fact | None]] = [(f.text, f) for f in facts]
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            pieces.insert(rng.randint(1, len(pieces)), (rng.choice(FILLERS), None))
        if len(domains) > 1 and rng.random() < LONG_SHARE:
            # A second paragraph of another domain (no common facts, so no question has two answers).
            other = rng.choice([i for i in range(len(domains)) if i != choice])
            group, weights = domains[other]
            own = [0.0 if r.domain == "common" else w for r, w in zip(group, weights, strict=True)]
            more = _paragraph(rng, group, split, own)
            facts += more
            pieces += [(f.text, f) for f in more]
        context, offsets = "", {}
        for text, fact in pieces:
            if context:
                context += " "
            if fact is not None:
                offsets[id(fact)] = len(context)
            context += text
        asked: set[str] = set()
        for fact in rng.sample(facts, k=min(len(facts), rng.randint(2, 5))):
            made = _question(rng, fact, split)
            if made is None or made[0] in asked:
                continue
            question, answer_slot = made
            asked.add(question)
            start, end = fact.spans[answer_slot]
            base = offsets[id(fact)]
            answer = GoldAnswer(context[base + start : base + end], base + start)
            examples.append(
                QAExample(f"{split}-{len(examples):06d}", question, context, (answer,), f"{split}-{article}")
            )
            if len(examples) == n_questions:
                break
        article += 1
    return examples
