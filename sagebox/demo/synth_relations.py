"""The facts the QA generator can state, grouped by the kind of text they appear in (domains): read from
synth_relations.json, where they are written as data.

A relation names its slots and their value kinds, gives several sentences that state the fact and the questions
that ask for one of its slots. Questions are worded the way people ask: often with other words than the sentence
("Who set up X?" for "X was started by Y"), sometimes in a different order, and for the dev split in wordings
training never uses. Templates may name a value's form: `{p.last}` (surname), `{firm.short}`, `{x.Cap}` (first
letter upper case) and, for a person mentioned just before, `{p.Pron}`/`{p.pos}` (she/he, her/his).
All text there was written for Sagebox.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Question = tuple[str, str]  # (template, answer slot)
DATA_FILE = Path(__file__).resolve().parent / "synth_relations.json"


@dataclass(frozen=True)
class Relation:
    subject: str  # slot holding the entity the questions are about
    slots: dict[str, str]  # slot -> value kind
    sentences: tuple[str, ...]
    questions: tuple[Question, ...]  # (template, answer slot), used by every split
    dev_questions: tuple[Question, ...] = field(default=())  # wordings only the dev split asks
    domain: str = "misc"


def _questions(raw: list[list[str]]) -> tuple[Question, ...]:
    return tuple((template, slot) for template, slot in raw)


def _relation(raw: dict[str, Any], group: str) -> Relation:
    """One relation as written in the file: `slots` is "name:kind name:kind ..."."""
    kinds = dict(pair.split(":") for pair in raw["slots"].split())
    dev = _questions(raw.get("dev_questions", []))
    questions = _questions(raw["questions"])
    return Relation(raw["subject"], kinds, tuple(raw["sentences"]), questions, dev, raw.get("domain", group))


def _read(path: Path = DATA_FILE) -> tuple[dict[str, tuple[Relation, ...]], tuple[Relation, ...], tuple[str, ...]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    domains = {name: tuple(_relation(raw, name) for raw in rels) for name, rels in document["domains"].items()}
    common = tuple(_relation(raw, "common") for raw in document["common"])
    return domains, common, tuple(document["fillers"])


DOMAINS, COMMON, FILLERS = _read()
# Facts of no particular domain (COMMON) are mixed into paragraphs of every domain; FILLERS are sentences with no
# facts, mixed in so that not every sentence answers a question.
PEOPLE = DOMAINS["people"]
ALL_RELATIONS: tuple[Relation, ...] = tuple(r for relations in DOMAINS.values() for r in relations) + COMMON
