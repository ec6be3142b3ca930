"""Generated QA over generic clauses: the domain-free part of the demo model's data.

synth_squad.py states facts of fixed relations (a birth, a founding, a fare) in templates written for them, so a
model trained on it alone learns those relations' wordings. Here every sentence is one clause built from parts,
"<agent> <verb> <object> <adjuncts>", where the verb (about 150, in groups of synonyms), the object (from a few
hundred nouns) and the adjuncts (when, where, how long, with what, with whom, why, for how much, how many) are
drawn independently, in the active voice or the passive. Questions are made from the clause's parts, not from a
sentence template: the verb is often another of its sense ("mended" for "repaired"), the voice may differ from
the sentence's, adjuncts the question does not need are dropped. So the model has to find the clause a question is
about and take the part the question word asks for, whatever the topic; every paragraph holds several clauses with
parts of the same kinds as distractors. The register stays the generator's: short third-person declarative
sentences (tests/data/heldout/README.md lists what the held-out set must avoid). Deterministic from the seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from sagebox.demo.synth_values import (
    FOODS,
    MATERIALS,
    PLANTS,
    PURPOSES,
    REASONS,
    Value,
    _words,
    make_value,
    split_items,
)
from sagebox.pipeline.data.squad import GoldAnswer, QAExample

__all__ = ["generate"]


@dataclass(frozen=True)
class Verb:
    base: str
    past: str
    participle: str


def _verb(spec: str) -> Verb:
    """ "repair", "carry:carried", "sew:sewed:sewn": the past and participle of regular verbs are derived."""
    parts = spec.split(":")
    base = parts[0]
    word, space, particle = base.partition(" ")  # "measure out": the first word is inflected
    if len(parts) > 1:
        past = parts[1]
    elif word.endswith("e"):
        past = word + "d" + space + particle
    elif word.endswith("y") and word[-2] not in "aeiou":
        past = word[:-1] + "ied" + space + particle
    else:
        past = word + "ed" + space + particle
    return Verb(base, past, parts[2] if len(parts) > 2 else past)


# Synonym groups (one sense each) with the kind of object they take; a question may use any verb of the group.
_SENSES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (kind, tuple(words.split("|")))
    for kind, words in (
        ("thing", "repair|mend|fix"),
        ("thing", "check|inspect|examine"),
        ("thing", "clean|wash|scrub"),
        ("thing", "paint|repaint"),
        ("thing", "move|shift|carry:carried"),
        ("thing", "lift|raise|hoist"),
        ("thing", "store|keep:kept|stow:stowed"),
        ("thing", "hide:hid:hidden|conceal"),
        ("thing", "find:found|discover|locate"),
        ("thing", "lose:lost|mislay:mislaid"),
        ("thing", "buy:bought|purchase"),
        ("thing", "sell:sold"),
        ("thing", "order|request"),
        ("thing", "lend:lent|loan"),
        ("thing", "borrow"),
        ("thing", "return|give back:gave back:given back|bring back:brought back"),
        ("thing", "build:built|make:made|construct"),
        ("thing", "polish|shine:shone"),
        ("thing", "replace|swap:swapped"),
        ("thing", "weigh"),
        ("thing", "measure"),
        ("thing", "photograph|film"),
        ("thing", "draw:drew:drawn|sketch"),
        ("thing", "label|tag:tagged|mark"),
        ("thing", "wrap:wrapped|pack"),
        ("thing", "unpack|unwrap:unwrapped"),
        ("thing", "open|unlock"),
        ("thing", "close|shut:shut|lock"),
        ("thing", "fill|top up:topped up"),
        ("thing", "empty|drain"),
        ("thing", "oil|grease"),
        ("thing", "sharpen|hone"),
        ("thing", "test|try:tried"),
        ("thing", "deliver|drop off:dropped off"),
        ("thing", "collect|pick up:picked up|fetch"),
        ("thing", "load|stack"),
        ("thing", "unload"),
        ("thing", "tie:tied|fasten|secure"),
        ("thing", "cut:cut|trim:trimmed"),
        ("thing", "fold|crease"),
        ("thing", "hang:hung|suspend"),
        ("thing", "drop:dropped|let fall:let fall"),
        ("thing", "break:broke:broken|damage|crack"),
        ("thing", "donate|give away:gave away:given away"),
        ("thing", "steal:stole:stolen|take:took:taken"),
        ("thing", "insure|value"),
        ("thing", "restore|refurbish"),
        ("thing", "dismantle|take apart:took apart:taken apart"),
        ("thing", "assemble|put together:put together"),
        ("thing", "tune|adjust"),
        ("document", "sign|initial"),
        ("document", "read:read|study:studied"),
        ("document", "write:wrote:written|draft"),
        ("document", "copy:copied|transcribe"),
        ("document", "send:sent|post|mail"),
        ("document", "receive|get:got"),
        ("document", "file|archive"),
        ("document", "translate"),
        ("document", "print|publish"),
        ("document", "burn:burnt|destroy"),
        ("document", "correct|revise"),
        ("document", "approve|accept"),
        ("document", "reject|turn down:turned down"),
        ("food", "bake|cook"),
        ("food", "chop:chopped|slice|dice"),
        ("food", "boil|simmer"),
        ("food", "serve|dish up:dished up"),
        ("food", "taste|sample"),
        ("food", "weigh out:weighed out|measure out"),
        ("food", "stir:stirred|mix"),
        ("food", "freeze:froze:frozen|chill"),
        ("plant", "plant|sow:sowed:sown"),
        ("plant", "water|soak"),
        ("plant", "prune|cut back:cut back"),
        ("plant", "dig up:dug up|lift out"),
        ("plant", "pick|harvest"),
        ("plant", "feed:fed|fertilise"),
    )
)
_THINGS = _words(
    "ladder|kettle|barrel|crate|cabinet|compass|clock|anchor|oar|sail|net|basket|saddle|"
    "stove|chimney|gate|fence|window|door|boiler|pump|valve|cable|mast|tent|trunk|mirror|chair|bench|table|"
    "wardrobe|bicycle|wheelbarrow|lamp|radio|typewriter|camera|microscope|violin|drum|harp|banner|flag|quilt|"
    "rug|curtain|kiln|loom|spinning wheel|anvil|chisel set|toolbox|padlock|hinge|shutter|skylight|weathervane|"
    "hourglass|barometer|thermometer|scale|rope|chain|bucket|trolley|cart|sledge|canoe|dinghy|raft|"
    "generator|heater|fan|fridge|freezer|engine|gearbox|propeller|rudder|helmet|jacket|boots|satchel|trophy|"
    "medal|vase|jug|teapot|bowl|platter|candlestick|chandelier|statue|bust|painting|frame|tapestry|carpet|"
    "organ|piano|accordion|kayak|tractor|plough|scythe|beehive|birdcage|aquarium|glasshouse|shed|kennel"
)
_DOCUMENTS = _words(
    "letter|ledger|map|report|contract|invoice|manuscript|petition|licence|certificate|receipt|"
    "timetable|notebook|deed|will|register|script|poster|pamphlet|telegram|postcard|inventory|chart|plan|"
    "permit|warrant|passport|menu|brochure|recipe card|field notes|minutes"
)
_PLACES = _words(
    "the cellar|the boathouse|the north tower|the workshop|the harbour office|the attic|the vestry|the east field|"
    "the signal box|the engine room|the greenhouse|the courtyard|the loft|the pantry|the chapel|the stable yard|"
    "the wheelhouse|the lower deck|the reading room|the back garden|the kitchen|the porch|the garage|"
    "the storeroom|the gatehouse|the laundry|the hayloft|the crypt|the station yard|the quay|the allotment|"
    "the bandstand|the lecture hall|the market hall|the post office|the pier|the mill|the forge|the orchard"
)
_TOOLS = _words(
    "a chisel|a file|a brass key|a soft cloth|a wire brush|a spanner|a needle|a paintbrush|a crowbar|a ladle|"
    "a magnifying glass|a tape measure|a torch|a hacksaw|a mallet|a trowel|a fork|a pair of pliers|a sponge|"
    "a feather duster|a sharp knife|a rolling pin|a whisk|a hose|a bucket of sand|a length of wire|a pulley|"
    "a pocket knife|a steel ruler|a fountain pen|a pencil|a winch|a sieve|an old towel|a hammer"
)
_MODIFIERS = _words(
    "old|new|broken|large|small|heavy|spare|second|blue|red|green|wooden|iron|brass|copper|rusty|antique|"
    "leather|paper|glass|long|narrow|tall|square|round|oak|tin|stone|cracked|borrowed"
)


def _plural(noun: str) -> str:
    head, _, tail = noun.rpartition(" ")
    word = tail or noun
    if word.endswith(("s", "x", "ch", "sh")):
        word += "es"
    elif word.endswith("y") and word[-2] not in "aeiou":
        word = word[:-1] + "ies"
    elif word.endswith("fe"):
        word = word[:-2] + "ves"
    else:
        word += "s"
    return f"{head} {word}" if head else word


def _plural_noun(noun: str) -> bool:
    """Foods and plants come as they are used: "eggs", "walnuts" take "were"."""
    return noun.endswith("s") and not noun.endswith(("ss", "us"))


@dataclass
class _Clause:
    agent: Value
    sense: tuple[Verb, ...]
    verb: Verb
    noun: str  # the object's head noun(s), e.g. "lantern"
    object_text: str  # as the sentence first writes it: "the old lantern", "38 lanterns"
    count: str = ""  # "38" when the object is counted
    adjuncts: dict[str, Value] = field(default_factory=dict)  # kind -> value (its text is the answer)


# kind -> (how the sentence introduces it, the question words, the value maker)
_ADJUNCT_KINDS = ("time", "date", "place", "duration", "tool", "companion", "reason", "purpose", "price")


def _adjunct_value(kind: str, rng: random.Random, split: str) -> Value:
    if kind == "time":
        return make_value("time", rng, split)
    if kind == "date":
        if rng.random() < 0.3:
            return make_value("weekday", rng, split)
        return make_value("date", rng, split)
    if kind == "place":
        if rng.random() < 0.3:
            return make_value("town", rng, split)
        return Value(rng.choice(split_items(_PLACES, split)))
    if kind == "duration":
        return make_value(rng.choice(("span", "duration")), rng, split)
    if kind == "tool":
        return Value(rng.choice(split_items(_TOOLS, split)))
    if kind == "companion":
        return make_value("person", rng, split)
    if kind == "reason":
        return Value(rng.choice(split_items(REASONS, split)))
    if kind == "purpose":
        return Value(rng.choice(split_items(PURPOSES, split)))
    if kind == "price":
        return make_value("price", rng, split)
    raise ValueError(kind)


def _intro(kind: str, value: Value, rng: random.Random, companion_too: bool) -> str:
    """The words before an adjunct's value in a sentence."""
    if kind == "time":
        return "at "
    if kind == "date":
        return "on "
    if kind == "place":
        if value.text.startswith("the "):
            return rng.choice(("in ", "in ", "at ", "near ", "behind ", "beside "))
        return rng.choice(("in ", "at ", "near "))
    if kind == "duration":
        return "for "
    if kind == "tool":
        return "using " if companion_too else rng.choice(("with ", "using "))
    if kind == "companion":
        return rng.choice(("with ", "together with ", "helped by ", "along with "))
    if kind == "reason":
        return rng.choice(("because ", "as ", "since "))
    if kind == "price":
        return "for "
    return ""  # a purpose starts with "to" or "so that"


Piece = tuple[str, str | None]  # text, and the part it is the answer for (None: not an answer)


def _adjunct_pieces(clause: _Clause, kinds: Sequence[str], rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    companion_too = "companion" in clause.adjuncts
    for kind in kinds:
        value = clause.adjuncts[kind]
        pieces += [(" " + _intro(kind, value, rng, companion_too), None), (value.text, kind)]
    return pieces


def _agent_name(agent: Value, mentioned: set[str], rng: random.Random) -> str:
    if agent.text in mentioned and rng.random() < 0.6:
        return agent.forms.get("last", agent.text)
    return agent.text


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sentence(
    clause: _Clause, passive: bool, rng: random.Random, mentioned: set[str], previous_agent: str
) -> list[Piece]:
    """One clause as pieces of text; the agent, object and adjunct pieces are tagged with their part."""
    kinds = list(clause.adjuncts)
    rng.shuffle(kinds)
    # A reason or purpose is a clause of its own: it goes last, so no later adjunct seems to belong to it.
    kinds.sort(key=lambda k: k in ("reason", "purpose"))
    front = [k for k in kinds if k in ("time", "date") and rng.random() < 0.35][:1]
    back = [k for k in kinds if k not in front]
    obj: list[Piece] = [(clause.object_text, "object")]
    if clause.count:
        # "38 lanterns": the count alone is the answer to "how many"
        obj = [(clause.count, "count"), (clause.object_text[len(clause.count) :], None)]
    agent = clause.agent
    opening: list[Piece] = []
    if front:
        intro = _intro(front[0], clause.adjuncts[front[0]], rng, False)
        opening = [(_cap(intro), None), (clause.adjuncts[front[0]].text, front[0]), (", ", None)]
    named_before = agent.text in mentioned
    mentioned.add(agent.text)
    if passive:
        first = obj if opening else [(_cap(obj[0][0]), obj[0][1]), *obj[1:]]
        who = agent.forms.get("last", agent.text) if named_before and rng.random() < 0.6 else agent.text
        verb = " were " if clause.count or _plural_noun(clause.noun) else " was "
        return [
            *opening,
            *first,
            (f"{verb}{clause.verb.participle} by ", None),
            (who, "agent"),
            *_adjunct_pieces(clause, back, rng),
            (".", None),
        ]
    if previous_agent == agent.text and rng.random() < 0.5:
        subject: Piece = (agent.forms.get("pron", "they"), None)
    else:
        subject = (agent.forms.get("last", agent.text) if named_before and rng.random() < 0.6 else agent.text, "agent")
    if not opening:
        subject = (_cap(subject[0]), subject[1])
    return [*opening, subject, (f" {clause.verb.past} ", None), *obj, *_adjunct_pieces(clause, back, rng), (".", None)]


def _question(clause: _Clause, part: str, rng: random.Random) -> str:
    """A question whose answer is the clause's `part`."""
    verb = rng.choice(clause.sense) if rng.random() < 0.6 else clause.verb
    plural = clause.count != "" or _plural_noun(clause.noun)
    noun = _plural(clause.noun) if clause.count else clause.noun
    if plural:
        obj = f"the {noun}" if rng.random() < 0.5 else noun
    else:
        obj = clause.object_text if rng.random() < 0.5 else f"the {clause.noun}"
    agent = clause.agent
    who = agent.forms.get("last", agent.text) if rng.random() < 0.5 else agent.text
    # One other adjunct sometimes narrows the question ("When did Greaves repair the lantern in the cellar?").
    others = [k for k in clause.adjuncts if k != part and k in ("place", "tool", "date", "time")]
    extra = ""
    if others and rng.random() < 0.3:
        kind = rng.choice(others)
        extra = " " + _intro(kind, clause.adjuncts[kind], rng, "companion" in clause.adjuncts).strip()
        extra += " " + clause.adjuncts[kind].text
    be = "were" if plural else "was"
    did = "did"
    asks = {
        "agent": [
            f"Who {verb.past} {obj}{extra}?",
            f"Who {verb.past} {obj}?",
            f"By whom {be} {obj} {verb.participle}{extra}?",
            f"Which person {verb.past} {obj}?",
        ],
        "object": [
            f"What {did} {who} {verb.base}{extra}?",
            f"What {be} {verb.participle} by {who}{extra}?",
        ],
        "count": [f"How many {noun} {did} {who} {verb.base}?", f"How many {noun} {be} {verb.participle}{extra}?"],
        "time": [
            f"When {did} {who} {verb.base} {obj}{extra}?",
            f"At what time {did} {who} {verb.base} {obj}?",
            f"What time {be} {obj} {verb.participle}?",
        ],
        "date": [
            f"When {did} {who} {verb.base} {obj}{extra}?",
            f"On what day {did} {who} {verb.base} {obj}?",
            f"When {be} {obj} {verb.participle}?",
        ],
        "place": [
            f"Where {did} {who} {verb.base} {obj}{extra}?",
            f"Where {be} {obj} {verb.participle}?",
            f"In what place {did} {who} {verb.base} {obj}?",
        ],
        "duration": [
            f"How long {did} {who} {verb.base} {obj} for?",
            f"For how long {be} {obj} {verb.participle}?",
            f"How long did it take {who} to {verb.base} {obj}?",
        ],
        "tool": [
            f"What {did} {who} use to {verb.base} {obj}?",
            f"With what {did} {who} {verb.base} {obj}?",
            f"Which tool {did} {who} use on {obj}?",
        ],
        "companion": [
            f"Who {did} {who} {verb.base} {obj} with?",
            f"Who helped {who} {verb.base} {obj}?",
            f"With whom {did} {who} {verb.base} {obj}?",
        ],
        "reason": [f"Why {did} {who} {verb.base} {obj}?", f"Why {be} {obj} {verb.participle}?"],
        "purpose": [
            f"Why {did} {who} {verb.base} {obj}?",
            f"For what purpose {be} {obj} {verb.participle}?",
            f"What was the aim of {who}'s work on {obj}?",
        ],
        "price": [
            f"How much {did} {who} {verb.base} {obj} for?",
            f"What price {did} {who} get for {obj}?" if verb.base == "sell" else f"How much {did} {who} pay for {obj}?",
            f"For how much {be} {obj} {verb.participle}?",
        ],
    }
    return " ".join(rng.choice(asks[part]).split())


def _clause(rng: random.Random, split: str, agent: Value, used: set[str]) -> _Clause | None:
    kind, words = rng.choice(split_items(_SENSES, split))
    if words[0] in used:
        return None
    sense = tuple(_verb(w) for w in words)
    verb = rng.choice(sense)
    pool = {"thing": _THINGS, "document": _DOCUMENTS, "food": FOODS, "plant": PLANTS}[kind]
    noun = rng.choice(split_items(pool, split))
    if any(noun in u for u in used):
        return None
    used.add(words[0])
    used.add(noun)
    count = ""
    if kind in ("thing", "document") and rng.random() < 0.15:
        count = make_value("count" if rng.random() < 0.3 else "few", rng, split).text
        object_text = f"{count} {_plural(noun)}"
    elif kind in ("food", "plant"):
        object_text = f"the {noun}"
    else:
        modifier = rng.choice((*split_items(_MODIFIERS, split), *split_items(MATERIALS, split)))
        object_text = f"the {modifier} {noun}" if rng.random() < 0.4 else f"the {noun}"
    n_adjuncts = rng.choice((1, 2, 2, 3))
    options = [k for k in _ADJUNCT_KINDS if k != "price" or words[0] in ("buy:bought", "sell:sold", "order")]
    chosen = rng.sample(options, k=min(n_adjuncts, len(options)))
    if "reason" in chosen and "purpose" in chosen:
        chosen.remove("purpose")
    adjuncts = {k: _adjunct_value(k, rng, split) for k in chosen}
    return _Clause(agent, sense, verb, noun, object_text, count, adjuncts)


def _paragraph(rng: random.Random, split: str) -> tuple[str, list[tuple[_Clause, dict[str, tuple[int, int]]]]]:
    """Three to six clauses by one to three people, in the active voice or (a quarter of paragraphs) the passive."""
    passive = rng.random() < 0.25
    agents: list[Value] = []
    for _ in range(rng.choice((1, 2, 2, 3))):
        person = make_value("person", rng, split)
        if person.forms.get("last") not in {a.forms.get("last") for a in agents}:
            agents.append(person)
    used: set[str] = set()
    clauses: list[_Clause] = []
    target = rng.randint(3, 6)
    for _ in range(30):
        if len(clauses) == target:
            break
        clause = _clause(rng, split, rng.choice(agents), used)
        if clause is not None:
            clauses.append(clause)
    text = ""
    placed: list[tuple[_Clause, dict[str, tuple[int, int]]]] = []
    mentioned: set[str] = set()
    previous = ""
    for clause in clauses:
        pieces = _sentence(clause, passive and rng.random() < 0.8, rng, mentioned, previous)
        previous = clause.agent.text
        if text:
            text += " "
        spans: dict[str, tuple[int, int]] = {}
        for piece, part in pieces:
            if part is not None and part not in spans:
                spans[part] = (len(text), len(text) + len(piece))
            text += piece
        placed.append((clause, spans))
    return text, placed


def generate(n_questions: int, seed: int, split: str = "train") -> list[QAExample]:
    """`n_questions` labelled questions over generic clauses (see the module's docstring)."""
    rng = random.Random(f"clauses:{split}:{seed}")
    examples: list[QAExample] = []
    article = 0
    while len(examples) < n_questions:
        context, placed = _paragraph(rng, split)
        # A part is only asked about when its text occurs once in the context: every question has one answer.
        asked: set[str] = set()
        candidates: list[tuple[_Clause, str, tuple[int, int]]] = []
        for clause, spans in placed:
            for part, (start, end) in spans.items():
                if context.count(context[start:end]) == 1:
                    candidates.append((clause, part, (start, end)))
        rng.shuffle(candidates)
        for clause, part, (start, end) in candidates[: rng.randint(2, 5)]:
            question = _question(clause, part, rng)
            if question in asked:
                continue
            asked.add(question)
            gold = (GoldAnswer(context[start:end], start),)
            examples.append(
                QAExample(f"{split}-c{len(examples):06d}", question, context, gold, f"{split}-clauses-{article}")
            )
            if len(examples) == n_questions:
                break
        article += 1
    return examples
