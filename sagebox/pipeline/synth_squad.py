"""A generator of labelled SQuAD-format QA data: short made-up biographies and geography with answer spans.

Every paragraph mixes several entities of the same kinds (people, firms, places), so a question can only be
answered by binding its entity to the right fact, not by spotting a type. Names are built from syllables, so
no split shares a name by design, and the dev split also asks some questions in wordings training never saw.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from sagebox.pipeline.squad import GoldAnswer, QAExample

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ren",
    "tas",
    "vel",
    "dor",
    "in",
    "sa",
    "bri",
    "ol",
    "fen",
    "ga",
    "ru",
    "zel",
    "mar",
    "nov",
    "qui",
    "thal",
    "ev",
    "ar",
    "bel",
    "cor",
    "da",
    "el",
    "fi",
    "gor",
    "hal",
    "is",
    "jo",
    "kel",
    "lum",
    "mor",
    "na",
    "or",
    "pe",
    "ril",
    "su",
    "tor",
    "ul",
    "va",
    "wen",
    "xa",
    "yor",
    "zu",
    "an",
    "ber",
    "cal",
    "den",
    "er",
    "fal",
    "gil",
    "han",
    "ist",
    "jar",
]
_CITY_SUFFIXES = ("burg", "ton", "field", "haven", "stad", "mouth", "ville", "port", "dale", "wick")
_FIRM_SUFFIXES = ("Labs", "Industries", "Systems", "Works", "Group", "Foods", "Motors", "Textiles", "Press")
_PROFESSIONS = [
    "architect",
    "botanist",
    "carpenter",
    "chemist",
    "diplomat",
    "engineer",
    "geologist",
    "historian",
    "journalist",
    "librarian",
    "mathematician",
    "midwife",
    "navigator",
    "painter",
    "pharmacist",
    "photographer",
    "pilot",
    "potter",
    "sculptor",
    "surgeon",
    "teacher",
    "translator",
    "veterinarian",
    "watchmaker",
    "weaver",
]
_INSTRUMENTS = [
    "cello",
    "violin",
    "oboe",
    "harp",
    "trumpet",
    "accordion",
    "clarinet",
    "bassoon",
    "flute",
    "mandolin",
]
_ANIMALS = [
    "parrot",
    "tortoise",
    "greyhound",
    "ferret",
    "donkey",
    "goat",
    "peacock",
    "rabbit",
    "falcon",
    "pony",
]
_COLOURS = ["green", "crimson", "amber", "violet", "indigo", "silver", "orange", "teal"]
_LANDS = ("rainforest", "woodland", "jungle", "cloud forest", "mangrove forest")
_COUNT_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_FRACTIONS = ("over half", "about a third", "nearly a quarter", "almost two thirds", "roughly a tenth")
_FILLERS = (
    "The region is known for its mild winters.",
    "Local newspapers covered the story for weeks.",
    "Many visitors arrive there every summer.",
    "Historians still argue about the details.",
    "The surrounding hills are covered in pine forests.",
    "A small museum now tells the whole story.",
    "Trade along the coast grew steadily in those years.",
)


def _name(rng: random.Random, parts: tuple[int, int]) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(*parts))).capitalize()


def _number(rng: random.Random, low: int, high: int) -> str:
    return f"{rng.randint(low, high):,}"


# Value makers by slot kind; each returns a fresh surface string.
_VALUES: dict[str, Callable[[random.Random], str]] = {
    "person": lambda r: f"{_name(r, (2, 3))} {_name(r, (2, 3))}",
    "city": lambda r: _name(r, (1, 2)) + r.choice(_CITY_SUFFIXES),
    "firm": lambda r: f"{_name(r, (2, 3))} {r.choice(_FIRM_SUFFIXES)}",
    "river": lambda r: _name(r, (2, 3)),
    "mountain": lambda r: _name(r, (2, 3)),
    "sea": lambda r: r.choice(("the Gulf of ", "Lake ", "the Bay of ")) + _name(r, (2, 3)),
    "year": lambda r: str(r.randint(1720, 2023)),
    "employees": lambda r: _number(r, 12, 90000) + " people",
    "km": lambda r: _number(r, 40, 3900) + " kilometres",
    "metres": lambda r: _number(r, 900, 8600) + " metres",
    "profession": lambda r: r.choice(_PROFESSIONS),
    "instrument": lambda r: r.choice(_INSTRUMENTS),
    "animal": lambda r: r.choice(_ANIMALS),
    "pet": lambda r: _name(r, (2, 2)),
    "colour": lambda r: r.choice(_COLOURS),
    "forest": lambda r: f"{_name(r, (2, 3))} {r.choice(_LANDS)}",
    "alias": lambda r: _name(r, (3, 4)),
    "area": lambda r: _number(r, 120, 9000) + ",000",
    "count": lambda r: r.choice(_COUNT_WORDS),
    "country": lambda r: _name(r, (2, 3)),
    "percent": lambda r: f"{r.randint(3, 79)}%",
    "fraction": lambda r: r.choice(_FRACTIONS),
    "species": lambda r: _number(r, 300, 40000),
    "billions": lambda r: f"{r.randint(2, 900)} billion",
}


@dataclass(frozen=True)
class Relation:
    subject: str  # slot holding the entity the questions are about
    slots: dict[str, str]  # slot -> value kind
    sentences: tuple[str, ...]
    questions: tuple[tuple[str, str], ...]  # (template, answer slot), used by every split
    dev_questions: tuple[tuple[str, str], ...] = field(default=())  # wordings only the dev split asks


BIOGRAPHY: tuple[Relation, ...] = (
    Relation(
        "p",
        {"p": "person", "city": "city", "year": "year"},
        (
            "{p} was born in {city} in {year}.",
            "Born in {city} in {year}, {p} grew up far from the sea.",
            "{p} came into the world in {year} in the town of {city}.",
        ),
        (
            ("Where was {p} born?", "city"),
            ("In which town was {p} born?", "city"),
            ("When was {p} born?", "year"),
            ("In what year was {p} born?", "year"),
        ),
        (("What is the birthplace of {p}?", "city"), ("What year saw the birth of {p}?", "year")),
    ),
    Relation(
        "p",
        {"p": "person", "profession": "profession"},
        (
            "{p} worked as a {profession}.",
            "By training, {p} was a {profession}.",
            "{p} earned a living as a {profession}.",
        ),
        (("What was {p}'s profession?", "profession"), ("What did {p} work as?", "profession")),
        (("What was the occupation of {p}?", "profession"),),
    ),
    Relation(
        "firm",
        {"p": "person", "firm": "firm", "year": "year"},
        (
            "{p} founded {firm} in {year}.",
            "In {year}, {p} started a company called {firm}.",
            "{firm} was set up by {p} in {year}.",
        ),
        (
            ("Who founded {firm}?", "p"),
            ("Who started {firm}?", "p"),
            ("When was {firm} founded?", "year"),
            ("In which year was {firm} set up?", "year"),
        ),
        (("Who is the founder of {firm}?", "p"), ("In what year did {firm} open for business?", "year")),
    ),
    Relation(
        "firm",
        {"firm": "firm", "city": "city", "employees": "employees"},
        (
            "{firm} is headquartered in {city} and employs {employees}.",
            "With {employees} on its payroll, {firm} runs everything from {city}.",
            "{firm} has its head office in {city}, where it employs {employees}.",
        ),
        (
            ("Where is {firm} headquartered?", "city"),
            ("In which city is {firm} based?", "city"),
            ("How many people does {firm} employ?", "employees"),
            ("How many employees does {firm} have?", "employees"),
        ),
        (
            ("Where does {firm} have its main office?", "city"),
            ("What is the size of the workforce of {firm}?", "employees"),
        ),
    ),
    Relation(
        "river",
        {"river": "river", "km": "km", "sea": "sea"},
        (
            "The {river} River is {km} long and flows into {sea}.",
            "Running for {km}, the {river} River empties into {sea}.",
            "The {river} River ends in {sea} after a course of {km}.",
        ),
        (
            ("How long is the {river} River?", "km"),
            ("What is the length of the {river} River?", "km"),
            ("Into what does the {river} River flow?", "sea"),
            ("Where does the {river} River end?", "sea"),
        ),
        (("Where does the {river} River drain?", "sea"), ("How far does the {river} River run?", "km")),
    ),
    Relation(
        "mountain",
        {"mountain": "mountain", "metres": "metres", "year": "year"},
        (
            "Mount {mountain} rises {metres} above sea level and was first climbed in {year}.",
            "First climbed in {year}, Mount {mountain} stands {metres} high.",
        ),
        (
            ("How high is Mount {mountain}?", "metres"),
            ("When was Mount {mountain} first climbed?", "year"),
        ),
        (("What is the height of Mount {mountain}?", "metres"),),
    ),
    Relation(
        "p",
        {"p": "person", "instrument": "instrument"},
        (
            "{p} plays the {instrument} in a local orchestra.",
            "In the evenings {p} practises the {instrument}.",
        ),
        (("Which instrument does {p} play?", "instrument"), ("What does {p} play?", "instrument")),
        (("What musical instrument does {p} practise?", "instrument"),),
    ),
    Relation(
        "p",
        {"p": "person", "q": "person", "year": "year"},
        ("{p} married {q} in {year}.", "In {year}, {p} and {q} were married."),
        (("Who did {p} marry?", "q"), ("Whom did {p} marry?", "q")),
        (("Who is the spouse of {p}?", "q"),),
    ),
    Relation(
        "p",
        {"p": "person", "animal": "animal", "pet": "pet", "colour": "colour"},
        (
            "{p} keeps a {animal} named {pet} in a {colour} cage.",
            "A {animal} called {pet} lives with {p}, in a {colour} cage.",
        ),
        (
            ("What is the name of {p}'s {animal}?", "pet"),
            ("What kind of pet does {p} keep?", "animal"),
            ("What colour is the cage of {p}'s pet?", "colour"),
        ),
        (("What is {p}'s pet called?", "pet"),),
    ),
)


# Geography in the style of encyclopaedia paragraphs (names, areas, counts, shares, fractions).
GEOGRAPHY: tuple[Relation, ...] = (
    Relation(
        "forest",
        {"forest": "forest", "alias": "alias", "country": "country"},
        (
            "The {forest}, also known in English as {alias}, is a moist broadleaf forest in the north of {country}.",
            "Also called {alias} in English, the {forest} covers most of the lowlands of {country}.",
        ),
        (
            ("Which name is also used to describe the {forest} in English?", "alias"),
            ("What is the {forest} also known as?", "alias"),
            ("In which country does the {forest} lie?", "country"),
        ),
        (("What other English name does the {forest} have?", "alias"),),
    ),
    Relation(
        "forest",
        {"forest": "forest", "area": "area", "inner": "area"},
        (
            "Its basin encompasses {area} square kilometres, of which {inner} square kilometres are covered by "
            "the {forest}.",
            "The {forest} covers {inner} square kilometres of a basin of {area} square kilometres.",
        ),
        (
            ("How many square kilometres of the {forest} is covered in the basin?", "inner"),
            ("How many square kilometres does the basin of the {forest} encompass?", "area"),
        ),
        (("How large an area does the {forest} cover?", "inner"),),
    ),
    Relation(
        "forest",
        {"forest": "forest", "count": "count", "names": "count"},
        (
            "The region of the {forest} includes territory belonging to {count} nations, and states in {names} "
            "of them carry its name.",
            "Territory of {count} nations lies within the {forest}; {names} of them name a province after it.",
        ),
        (
            ("How many nations control the region of the {forest} in total?", "count"),
            ("How many nations name a province after the {forest}?", "names"),
        ),
        (("How many countries share the {forest}?", "count"),),
    ),
    Relation(
        "forest",
        {"forest": "forest", "country": "country", "percent": "percent", "second": "country"},
        (
            "Most of the {forest} lies within {country}, with {percent} of the forest, followed by {second}.",
            "{country} holds {percent} of the {forest}, more than any other country, ahead of {second}.",
        ),
        (
            ("What percentage of the {forest} does {country} have?", "percent"),
            ("Which country contains most of the {forest}?", "country"),
        ),
        (("How much of the {forest} lies in {country}?", "percent"),),
    ),
    Relation(
        "forest",
        {"forest": "forest", "fraction": "fraction", "billions": "billions", "species": "species"},
        (
            "The {forest} represents {fraction} of the planet's remaining rainforests, with an estimated "
            "{billions} individual trees divided into {species} species.",
            "With {billions} trees of {species} species, the {forest} makes up {fraction} of the world's "
            "remaining rainforests.",
        ),
        (
            ("What does the {forest} represent of the planet's remaining rainforests?", "fraction"),
            ("How many species of trees are in the {forest}?", "species"),
            ("How many individual trees does the {forest} have?", "billions"),
        ),
        (("How many tree species grow in the {forest}?", "species"),),
    ),
)
RELATIONS: tuple[Relation, ...] = BIOGRAPHY + GEOGRAPHY


@dataclass(frozen=True)
class _Fact:
    text: str
    spans: dict[str, tuple[int, int]]  # slot -> (start, end) within text
    values: dict[str, str]
    relation: Relation


def _render(template: str, values: dict[str, str]) -> tuple[str, dict[str, tuple[int, int]]]:
    out: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    cursor = 0
    for literal, slot, _, _ in string.Formatter().parse(template):
        out.append(literal)
        cursor += len(literal)
        if slot is not None:
            value = values[slot]
            spans[slot] = (cursor, cursor + len(value))
            out.append(value)
            cursor += len(value)
    return "".join(out), spans


def _paragraph(rng: random.Random, relations: tuple[Relation, ...]) -> list[_Fact]:
    """Three to six facts about a shared cast, so every paragraph has same-kind distractors."""
    cast: dict[str, list[str]] = {kind: [] for kind in _VALUES}
    facts: list[_Fact] = []
    used: set[tuple[int, str]] = set()
    for _ in range(rng.randint(3, 6)):
        index = rng.randrange(len(relations))
        relation = relations[index]
        values: dict[str, str] = {}
        for slot, kind in relation.slots.items():
            pool = cast[kind]
            reuse = kind in {"person", "firm", "forest", "country"} and pool and rng.random() < 0.5
            value = rng.choice(pool) if reuse else _VALUES[kind](rng)
            while value in values.values():
                value = _VALUES[kind](rng)
            values[slot] = value
            if value not in pool:
                pool.append(value)
        # An entity takes part in a relation at most once, so every question has exactly one answer.
        keys = {(index, values[slot]) for slot, kind in relation.slots.items() if kind in {"person", "firm", "forest"}}
        if keys & used:
            continue
        used |= keys
        text, spans = _render(rng.choice(relation.sentences), values)
        facts.append(_Fact(text, spans, values, relation))
    return facts


def generate(
    n_questions: int, seed: int, split: str = "train", relations: tuple[Relation, ...] = RELATIONS
) -> list[QAExample]:
    """`n_questions` labelled questions; split "dev" also draws the wordings reserved for it."""
    rng = random.Random(f"{split}:{seed}")
    examples: list[QAExample] = []
    article = 0
    while len(examples) < n_questions:
        facts = _paragraph(rng, relations)
        pieces: list[tuple[str, _Fact | None]] = [(f.text, f) for f in facts]
        for _ in range(rng.randint(0, 2)):
            pieces.insert(rng.randint(0, len(pieces)), (rng.choice(_FILLERS), None))
        context, offsets = "", {}
        for text, fact in pieces:
            if context:
                context += " "
            if fact is not None:
                offsets[id(fact)] = len(context)
            context += text
        asked: set[str] = set()
        for fact in rng.sample(facts, k=min(len(facts), rng.randint(2, 4))):
            wordings = list(fact.relation.questions)
            if split == "dev":
                wordings += list(fact.relation.dev_questions) * 2
            template, answer_slot = rng.choice(wordings)
            question, _ = _render(template, fact.values)
            if question in asked:
                continue
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
