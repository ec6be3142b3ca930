"""The facts the QA generator can state, grouped by the kind of text they appear in (domains).

A relation names its slots and their value kinds, gives several sentences that state the fact and the questions
that ask for one of its slots. Questions are worded the way people ask: often with other words than the sentence
("Who set up X?" for "X was started by Y"), sometimes in a different order, and for the dev split in wordings
training never uses. Templates may name a value's form: `{p.last}` (surname), `{firm.short}`, `{x.Cap}` (first
letter upper case) and, for a person mentioned just before, `{p.Pron}`/`{p.pos}` (she/he, her/his).
All text here was written for Sagebox.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Question = tuple[str, str]  # (template, answer slot)


@dataclass(frozen=True)
class Relation:
    subject: str  # slot holding the entity the questions are about
    slots: dict[str, str]  # slot -> value kind
    sentences: tuple[str, ...]
    questions: tuple[Question, ...]  # (template, answer slot), used by every split
    dev_questions: tuple[Question, ...] = field(default=())  # wordings only the dev split asks
    domain: str = "misc"


def _r(
    domain: str,
    subject: str,
    slots: str,
    sentences: tuple[str, ...],
    questions: tuple[Question, ...],
    dev: tuple[Question, ...] = (),
) -> Relation:
    kinds = dict(pair.split(":") for pair in slots.split())
    return Relation(subject, kinds, sentences, questions, dev, domain)


PEOPLE = (
    _r(
        "people",
        "p",
        "p:person child:childword profession:profession other:profession",
        (
            "The {child} of a {profession}, {p} became a {other}.",
            "{p}, whose father was a {profession}, trained as a {other}.",
            "Born to a {profession}, {p} later worked as a {other}.",
        ),
        (
            ("What did {p}'s father do?", "profession"),
            ("What job did {p}'s father have?", "profession"),
            ("What did {p} become?", "other"),
        ),
        (("What was {p}'s family background?", "profession"),),
    ),
    _r(
        "people",
        "p",
        "p:person town:town year:year",
        (
            "{p} was born in {town} in {year}.",
            "Born in {town} in {year}, {p} grew up above a shop.",
            "{p} came into the world in {year}, in the town of {town}.",
            "{p.Pron} was born in {year} in {town}.",
        ),
        (
            ("Where was {p} born?", "town"),
            ("In which town was {p} born?", "town"),
            ("When was {p} born?", "year"),
            ("In what year was {p} born?", "year"),
            ("Which town is {p} from?", "town"),
            ("What year did {p} come into the world?", "year"),
        ),
        (("What is the birthplace of {p}?", "town"), ("What year saw the birth of {p}?", "year")),
    ),
    _r(
        "people",
        "p",
        "p:person profession:profession",
        (
            "{p} worked as a {profession}.",
            "By training, {p} was a {profession}.",
            "{p} earned a living as a {profession}.",
            "{p.Pron} trained as a {profession} before anything else.",
        ),
        (
            ("What was {p}'s profession?", "profession"),
            ("What did {p} do for a living?", "profession"),
            ("What job did {p} have?", "profession"),
            ("What did {p} train as?", "profession"),
        ),
        (("What was the occupation of {p}?", "profession"),),
    ),
    _r(
        "people",
        "p",
        "p:person subject:subject org:org year:year",
        (
            "{p} studied {subject} at {org}, graduating in {year}.",
            "After reading {subject} at {org}, {p} graduated in {year}.",
            "{p.Pron} took a degree in {subject} at {org} and finished in {year}.",
        ),
        (
            ("What did {p} study?", "subject"),
            ("Which subject did {p} read?", "subject"),
            ("Where did {p} study {subject}?", "org"),
            ("When did {p} graduate?", "year"),
            ("In which year did {p} finish the degree?", "year"),
        ),
        (("What was {p}'s degree subject?", "subject"), ("At which institution was {p} a student?", "org")),
    ),
    _r(
        "people",
        "p",
        "p:person q:person year:year town:town",
        (
            "{p} married {q} in {year}.",
            "In {year}, {p} and {q} were married in {town}.",
            "{p} wed {q} at a small ceremony in {town} in {year}.",
        ),
        (
            ("Who did {p} marry?", "q"),
            ("Whom did {p} wed?", "q"),
            ("When did {p} get married?", "year"),
            ("Who became {p}'s husband or wife?", "q"),
        ),
        (("Who is the spouse of {p}?", "q"),),
    ),
    _r(
        "people",
        "p",
        "p:person age:age town:town year:year",
        (
            "{p} died in {town} in {year}, aged {age}.",
            "{p} died at home in {town} in {year} at the age of {age}.",
            "{p.Pron} died in {year}, aged {age}, in {town}.",
        ),
        (
            ("What age had {p} reached at death?", "age"),
            ("At what age did {p} die?", "age"),
            ("Where did {p} die?", "town"),
            ("In which year did {p} die?", "year"),
            ("When did {p} pass away?", "year"),
        ),
        (("How old was {p} at the time of death?", "age"),),
    ),
    _r(
        "people",
        "p",
        "p:person alias:alias",
        (
            "{p}, known to friends as {alias}, rarely gave interviews.",
            "Everyone in the village called {p} {alias}.",
            "{p} was nicknamed {alias} by the crew.",
        ),
        (
            ("What was {p}'s nickname?", "alias"),
            ("By what name was {p} also known?", "alias"),
            ("What did people call {p}?", "alias"),
            ("Who was known as {alias}?", "p"),
        ),
        (("Which nickname did {p} go by?", "alias"),),
    ),
    _r(
        "people",
        "p",
        "p:person award:award year:year book:book",
        (
            "{p} won the {award} in {year} for {book}.",
            "In {year}, {p} received the {award} for the book {book}.",
            "{book}, by {p}, won the {award} in {year}.",
        ),
        (
            ("Which prize did {p} win?", "award"),
            ("What award did {book} receive?", "award"),
            ("Which writer produced {book}?", "p"),
            ("When did {p} win the {award}?", "year"),
            ("For which book did {p} get the {award}?", "book"),
        ),
        (("Who penned {book}?", "p"), ("Which honour went to {book}?", "award")),
    ),
    _r(
        "people",
        "p",
        "p:person instrument:instrument org:org",
        (
            "{p} plays the {instrument} with {org}.",
            "In the evenings {p} practises the {instrument} for concerts with {org}.",
        ),
        (
            ("Which instrument does {p} play?", "instrument"),
            ("What does {p} play?", "instrument"),
            ("Who does {p} perform with?", "org"),
        ),
        (("What musical instrument does {p} practise?", "instrument"),),
    ),
    _r(
        "people",
        "p",
        "p:person q:person award:award",
        (
            "{p} was shortlisted for the {award}, but the prize went to {q}.",
            "The {award} did not go to {p}; {q} won it instead.",
        ),
        (
            ("Who won the {award}?", "q"),
            ("Who received the {award}?", "q"),
            ("Who was given the {award}?", "q"),
        ),
        (("To whom was the {award} awarded?", "q"),),
    ),
    _r(
        "people",
        "p",
        "p:person town:town year:year reason:reason",
        (
            "In {year}, {p} moved to {town} because {reason}.",
            "{p} left for {town} in {year}, because {reason}.",
        ),
        (
            ("Where did {p} move to?", "town"),
            ("When did {p} move to {town}?", "year"),
            ("Why did {p} move to {town}?", "reason"),
            ("In what year did {p} relocate?", "year"),
        ),
        (("What made {p} leave for {town}?", "reason"),),
    ),
)

BUSINESS = (
    _r(
        "business",
        "firm",
        "p:person firm:firm year:year",
        (
            "{p} founded {firm} in {year}.",
            "In {year}, {p} started a company called {firm}.",
            "{firm} was set up by {p} in {year}.",
            "{firm.Cap} traces its roots to {year}, when {p} opened the first workshop.",
        ),
        (
            ("Who founded {firm}?", "p"),
            ("Who started {firm}?", "p"),
            ("When was {firm} founded?", "year"),
            ("In which year was {firm} set up?", "year"),
            ("Whose company is {firm}?", "p"),
            ("How old is {firm}? In what year did it begin?", "year"),
        ),
        (("Who is the founder of {firm}?", "p"), ("In what year did {firm} open for business?", "year")),
    ),
    _r(
        "business",
        "firm",
        "firm:firm town:town count:count",
        (
            "{firm} is headquartered in {town} and employs {count} people.",
            "With {count} people on its payroll, {firm} runs everything from {town}.",
            "{firm} has its head office in {town}, where {count} staff work.",
        ),
        (
            ("Where is {firm} headquartered?", "town"),
            ("In which city is {firm} based?", "town"),
            ("How many people does {firm} employ?", "count"),
            ("How many staff work for {firm}?", "count"),
            ("How big is the workforce of {firm}?", "count"),
        ),
        (("Where does {firm} have its main office?", "town"), ("What is the headcount of {firm}?", "count")),
    ),
    _r(
        "business",
        "firm",
        "firm:firm p:person role:role year:year",
        (
            "{p} became {role} of {firm} in {year}.",
            "{firm.Cap} appointed {p} as its {role} in {year}.",
            "Since {year}, {firm} has been led by {p}, its {role}.",
        ),
        (
            ("Who serves as {role} at {firm}?", "p"),
            ("Who runs {firm}?", "p"),
            ("What is {p}'s job at {firm}?", "role"),
            ("When did {p} join {firm} as {role}?", "year"),
        ),
        (("Which position does {p} hold at {firm}?", "role"),),
    ),
    _r(
        "business",
        "firm",
        "firm:firm money:money percent:percent monthyear:monthyear",
        (
            "In the year to {monthyear}, {firm} reported sales of {money}, up {percent}.",
            "Revenue at {firm} rose {percent} to {money} in the twelve months to {monthyear}.",
            "{firm.Cap} took {money} in the year ending {monthyear}, an increase of {percent}.",
        ),
        (
            ("How much revenue did {firm} report?", "money"),
            ("What were the sales of {firm}?", "money"),
            ("By how much did {firm}'s sales grow?", "percent"),
            ("What was the increase in revenue at {firm}?", "percent"),
            ("When did {firm}'s financial year end?", "monthyear"),
        ),
        (("How much money did {firm} take in the year?", "money"),),
    ),
    _r(
        "business",
        "firm",
        "firm:firm money:money profit:money",
        (
            "Profit before tax at {firm} fell to {profit}, while costs climbed to {money}.",
            "{firm.Cap} made a profit of {profit} on costs of {money}.",
        ),
        (
            ("What profit did {firm} make?", "profit"),
            ("How much did {firm} earn after costs?", "profit"),
            ("What were {firm}'s costs?", "money"),
        ),
        (("How large was the pre-tax profit of {firm}?", "profit"),),
    ),
    _r(
        "business",
        "firm",
        "firm:firm other:firm money:money year:year",
        (
            "In {year}, {firm} bought its rival {other} for {money}.",
            "{other} was taken over by {firm} in {year} in a deal worth {money}.",
        ),
        (
            ("Which company did {firm} buy?", "other"),
            ("Who bought {other}?", "firm"),
            ("How much did {firm} pay for {other}?", "money"),
            ("What was the takeover of {other} worth?", "money"),
            ("When was {other} acquired?", "year"),
        ),
        (("Which business acquired {other}?", "firm"),),
    ),
    _r(
        "business",
        "firm",
        "firm:firm town:town reason:reason count:count",
        (
            "{firm} will close its plant in {town} because {reason}; {count} jobs are at risk.",
            "Because {reason}, {firm} is shutting its site in {town}, putting {count} jobs at risk.",
        ),
        (
            ("Why is {firm} closing the plant in {town}?", "reason"),
            ("Where is {firm} closing a site?", "town"),
            ("How many jobs are threatened by the closure?", "count"),
            ("What is the reason for the closure in {town}?", "reason"),
        ),
        (("How many workers could lose their jobs at {firm}?", "count"),),
    ),
)

SPORT = (
    _r(
        "sport",
        "team",
        "team:team other:team score:score town:town",
        (
            "{team} beat {other} {score} in {town} on Saturday.",
            "A {score} win over {other} in {town} kept {team} top of the table.",
            "{other} lost {score} to {team} at the ground in {town}.",
        ),
        (
            ("Who won the match?", "team"),
            ("What did the scoreboard read at the end?", "score"),
            ("Who did {team} beat?", "other"),
            ("Where was the game played?", "town"),
            ("Which side lost to {team}?", "other"),
            ("By what score did {team} win?", "score"),
        ),
        (("Which team came out on top?", "team"),),
    ),
    _r(
        "sport",
        "p",
        "p:person team:team minute:few ordinal:ordinal",
        (
            "{p} scored the winner for {team} in the {ordinal} minute of added time.",
            "The decisive goal came from {p}, who struck for {team} in the {ordinal} minute of stoppage time.",
        ),
        (
            ("Who scored the winning goal?", "p"),
            ("Who got the decisive goal for {team}?", "p"),
            ("In which minute of added time was the winner scored?", "ordinal"),
        ),
        (("Which player settled the game?", "p"),),
    ),
    _r(
        "sport",
        "team",
        "team:team count:count p:person",
        (
            "A crowd of {count} watched as {p} captained {team} for the last time.",
            "{p} led {team} out in front of {count} spectators.",
        ),
        (
            ("How many people watched the game?", "count"),
            ("What was the attendance?", "count"),
            ("Who captained {team}?", "p"),
            ("Who was the captain of {team}?", "p"),
        ),
        (("How large was the crowd?", "count"),),
    ),
    _r(
        "sport",
        "p",
        "p:person duration:period team:team",
        (
            "{p} of {team} will miss {duration} with a knee injury.",
            "A knee injury will keep {p} out of the {team} side for {duration}.",
        ),
        (
            ("How long will {p} be out?", "duration"),
            ("How many {duration.unit} will {p} miss?", "duration.number"),
            ("For how long is {p} injured?", "duration"),
            ("Which team does {p} play for?", "team"),
            ("Who is injured?", "p"),
        ),
        (("How much time will {p} miss?", "duration"),),
    ),
    _r(
        "sport",
        "team",
        "team:team other:team date:date",
        (
            "{team} next play {other} on {date}.",
            "The next fixture for {team} is against {other} on {date}.",
        ),
        (
            ("When is {team}'s next match?", "date"),
            ("Who will {team} play next?", "other"),
            ("On what date do {team} meet {other}?", "date"),
        ),
        (("Who are {team}'s next opponents?", "other"),),
    ),
)

EVENTS = (
    _r(
        "events",
        "org",
        "org:org date:date address:address town:town",
        (
            "{org.Cap} holds its open day on {date} at {address}, {town}.",
            "The open day of {org} takes place on {date} at {address} in {town}.",
            "On {date}, {org} opens its doors to the public at {address}.",
        ),
        (
            ("When is the open day?", "date"),
            ("On what date does {org} open its doors?", "date"),
            ("Where is the open day held?", "address"),
            ("What is the address of the event?", "address"),
        ),
        (("What day can the public visit {org}?", "date"),),
    ),
    _r(
        "events",
        "org",
        "org:org money:price child:price",
        (
            "Tickets cost {money} for adults and {child} for children.",
            "Adult tickets are {money}; children pay {child}.",
            "Entry is {money} ({child} for under-16s).",
        ),
        (
            ("How much is an adult ticket?", "money"),
            ("What do adults pay?", "money"),
            ("How much does a child's ticket cost?", "child"),
            ("What is the price for children?", "child"),
        ),
        (("What is the cost of entry for a grown-up?", "money"),),
    ),
    _r(
        "events",
        "org",
        "org:org count:count prev:count",
        (
            "Last year the festival drew {count} visitors, up from {prev} the year before.",
            "Some {count} people came last year, compared with {prev} the year before.",
        ),
        (
            ("How many visitors came last year?", "count"),
            ("How many people attended the festival last year?", "count"),
            ("How many visitors were there the year before?", "prev"),
        ),
        (("What was last year's attendance?", "count"),),
    ),
    _r(
        "events",
        "org",
        "org:org p:person instrument:instrument time:time",
        (
            "The evening concert starts at {time}, with {p} on {instrument}.",
            "{p} plays the {instrument} at the evening concert, which begins at {time}.",
        ),
        (
            ("What time does the concert start?", "time"),
            ("When does the evening concert begin?", "time"),
            ("Who is playing the {instrument}?", "p"),
            ("What will {p} play?", "instrument"),
        ),
        (("At what hour does the concert get under way?", "time"),),
    ),
    _r(
        "events",
        "org",
        "org:org reason:reason date:date",
        (
            "The parade planned for {date} has been cancelled because {reason}.",
            "Because {reason}, the organisers called off the parade on {date}.",
        ),
        (
            ("Why was the parade cancelled?", "reason"),
            ("Why was the parade called off?", "reason"),
            ("When was the parade supposed to take place?", "date"),
        ),
        (("What led to the cancellation of the parade?", "reason"),),
    ),
)

PLACES = (
    _r(
        "places",
        "town",
        "town:town river:river count:count",
        (
            "{town} lies on {river} and has a population of about {count}.",
            "About {count} people live in {town}, a market town on {river}.",
            "Home to roughly {count} people, {town} sits on the banks of {river}.",
        ),
        (
            ("How many people live in {town}?", "count"),
            ("What is the population of {town}?", "count"),
            ("Which river is {town} on?", "river"),
            ("What river flows through {town}?", "river"),
        ),
        (("How many inhabitants does {town} have?", "count"),),
    ),
    _r(
        "places",
        "town",
        "town:town length:distance city:town duration:span",
        (
            "{town} is {length} from {city}, about {duration} by train.",
            "The train from {city} to {town} takes about {duration} and covers {length}.",
        ),
        (
            ("How far is {town} from {city}?", "length"),
            ("How long does the train from {city} take?", "duration"),
            ("What is the distance between {town} and {city}?", "length"),
            ("How many {length.unit} is it from {city} to {town}?", "length.number"),
            ("How long is the journey by rail from {city} to {town}?", "duration"),
        ),
        (("How many kilometres or miles separate {town} and {city}?", "length"),),
    ),
    _r(
        "places",
        "town",
        "town:town food:dish material:material",
        (
            "{town} is famous for its {food} and its {material} carvings.",
            "Visitors come to {town} for the {food} and for carvings in {material}.",
        ),
        (
            ("What dish is {town} known for?", "food"),
            ("What is {town} famous for eating?", "food"),
            ("What are the carvings in {town} made of?", "material"),
        ),
        (("Which local speciality should you try in {town}?", "food"),),
    ),
    _r(
        "places",
        "org",
        "org:org time:time close:time weekday:weekday",
        (
            "{org.Cap} is open from {time} to {close}, except on {weekday}s.",
            "Opening hours at {org} are {time} until {close}; it is closed on {weekday}s.",
        ),
        (
            ("What time does {org} open?", "time"),
            ("When does {org} close?", "close"),
            ("On which day is {org} closed?", "weekday"),
            ("Which day of the week can you not visit {org}?", "weekday"),
        ),
        (("Until what time can you visit {org}?", "close"),),
    ),
    _r(
        "places",
        "town",
        "town:town season:season weather:weather",
        (
            "{town} is at its finest in {season}; the rest of the year brings {weather}.",
            "Go to {town} in {season}, since other seasons often bring {weather}.",
        ),
        (
            ("When is the best time to visit {town}?", "season"),
            ("Which season suits a trip to {town}?", "season"),
            ("What weather can visitors expect outside the best season?", "weather"),
        ),
        (("In what season should you travel to {town}?", "season"),),
    ),
)

GEOGRAPHY = (
    _r(
        "geography",
        "region",
        "region:region alias:alias language:language",
        (
            "{region.Cap}, called {alias} in {language}, is a high grassland in the south of the country.",
            "In {language} {region} is named {alias}, after the wind that blows across it.",
            "{region.Cap} (in {language}: {alias}) is a thinly settled upland.",
        ),
        (
            ("What is {region} called in {language}?", "alias"),
            ("What other name does {region} have?", "alias"),
            ("In which language is {region} called {alias}?", "language"),
            ("What is the {language} name for {region}?", "alias"),
        ),
        (("Under what name is {region} known in {language}?", "alias"),),
    ),
    _r(
        "geography",
        "region",
        "region:region area:area inner:area",
        (
            "{region.Cap} covers {area}, of which {inner} are farmland.",
            "Of the {area} of {region}, {inner} are farmed.",
            "Farms take up {inner} of {region}, which measures {area} in all.",
        ),
        (
            ("How large is {region}?", "area"),
            ("How much of {region} is farmland?", "inner"),
            ("What is the total area of {region}?", "area"),
            ("How many {area.unit} does {region} cover in all?", "area.number"),
            ("How much land in {region} is farmed?", "inner"),
            ("How many {inner.unit} of {region} are farmland?", "inner.number"),
        ),
        (("What area of {region} is used for farming?", "inner"),),
    ),
    _r(
        "geography",
        "region",
        "region:region count:few names:few",
        (
            "{region.Cap} stretches across {count} countries, and {names} of them have a province named after it.",
            "Land in {count} countries belongs to {region}; provinces in {names} of them carry its name.",
        ),
        (
            ("How many countries share {region}?", "count"),
            ("Across how many countries does {region} extend?", "count"),
            ("How many countries have a province named after {region}?", "names"),
        ),
        (("In total, how many nations have land in {region}?", "count"),),
    ),
    _r(
        "geography",
        "region",
        "region:region country:country percent:percent second:country other:percent",
        (
            "Most of {region} lies in {country}, with {percent} of it, followed by {second} with {other}.",
            "{country} holds {percent} of {region}, ahead of {second} with {other}.",
        ),
        (
            ("How much of {region} is in {country}?", "percent"),
            ("Which country has the largest part of {region}?", "country"),
            ("What share of {region} belongs to {second}?", "other"),
            ("Which country has the second largest share?", "second"),
        ),
        (("What percentage of {region} does {country} hold?", "percent"),),
    ),
    _r(
        "geography",
        "region",
        "region:region fraction:fraction count:count species:count",
        (
            "{region.Cap} is home to {fraction} of the country's wetland birds, some {count} pairs of {species} "
            "species.",
            "With {count} breeding pairs from {species} species, {region} holds {fraction} of the nation's "
            "wetland birds.",
        ),
        (
            ("What share of the country's wetland birds live in {region}?", "fraction"),
            ("How many bird species breed in {region}?", "species"),
            ("How many breeding pairs are there in {region}?", "count"),
        ),
        (("What proportion of the nation's wetland birds does {region} hold?", "fraction"),),
    ),
    _r(
        "geography",
        "river",
        "river:river length:distance lake:lake",
        (
            "{river.Cap} is {length} long and flows into {lake}.",
            "Running for {length}, {river} empties into {lake}.",
            "{river.Cap} ends in {lake} after a course of {length}.",
        ),
        (
            ("What distance does {river} cover?", "length"),
            ("How many {length.unit} long is {river}?", "length.number"),
            ("What is the length of {river}?", "length"),
            ("Into which lake does {river} flow?", "lake"),
            ("Where does {river} end?", "lake"),
        ),
        (("Where does {river} drain?", "lake"), ("How far does {river} run?", "length")),
    ),
    _r(
        "geography",
        "lake",
        "lake:lake length:height area:area",
        (
            "{lake} is {length} deep at its deepest point and covers {area}.",
            "Covering {area}, {lake} reaches a depth of {length}.",
        ),
        (
            ("How deep is {lake}?", "length"),
            ("What is the maximum depth of {lake}?", "length"),
            ("How many {length.unit} deep is {lake}?", "length.number"),
            ("How big is {lake}?", "area"),
            ("What area does {lake} cover?", "area"),
            ("How many {area.unit} does {lake} cover?", "area.number"),
        ),
        (("How far down does {lake} go at its deepest?", "length"),),
    ),
    _r(
        "geography",
        "island",
        "island:island length:height year:year p:person",
        (
            "The highest point of {island} rises {length} above sea level; {p} first climbed it in {year}.",
            "{p} was the first to reach the summit of {island}, in {year}; it stands {length} high.",
        ),
        (
            ("How high is the highest point of {island}?", "length"),
            ("How many {length.unit} high is the summit of {island}?", "length.number"),
            ("Who first climbed to the top of {island}?", "p"),
            ("When was the summit of {island} first reached?", "year"),
        ),
        (("What is the height of the summit on {island}?", "length"),),
    ),
)

NATURE = (
    _r(
        "nature",
        "species",
        "species:species length:size weight:weight",
        (
            "The {species} grows to {length} long and weighs up to {weight}.",
            "An adult {species} measures about {length} and can weigh {weight}.",
        ),
        (
            ("How long is an adult {species}?", "length"),
            ("How big does the {species} get?", "length"),
            ("How heavy is the {species}?", "weight"),
            ("How much does the {species} weigh?", "weight"),
            ("How many {weight.unit} can a {species} weigh?", "weight.number"),
        ),
        (("What size does the {species} reach?", "length"),),
    ),
    _r(
        "nature",
        "species",
        "species:species plant:plant food:animal",
        (
            "The {species} nests in {plant} and feeds mainly on {food}.",
            "It feeds mostly on {food} and builds its nest in {plant}.",
            "Feeding largely on {food}, the {species} hides its nest in {plant}.",
        ),
        (
            ("What does the {species} eat?", "food"),
            ("What is the main food of the {species}?", "food"),
            ("Where does the {species} nest?", "plant"),
            ("In what does the {species} build its nest?", "plant"),
        ),
        (("What makes up most of the diet of the {species}?", "food"),),
    ),
    _r(
        "nature",
        "species",
        "species:species count:few duration:period",
        (
            "The female lays {count} eggs, which hatch after {duration}.",
            "Clutches of {count} eggs hatch in about {duration}.",
        ),
        (
            ("How many eggs does the {species} lay?", "count"),
            ("How many eggs are in a clutch?", "count"),
            ("How long do the eggs take to hatch?", "duration"),
        ),
        (("After how much time do the eggs hatch?", "duration"),),
    ),
    _r(
        "nature",
        "species",
        "species:species country:country month:month",
        (
            "Each {month} the {species} leaves for {country}, where it spends the winter.",
            "It winters in {country}, setting off in {month}.",
        ),
        (
            ("Where does the {species} spend the winter?", "country"),
            ("In which month does the {species} leave?", "month"),
            ("Where does the {species} migrate to?", "country"),
        ),
        (("When does the {species} set off on migration?", "month"),),
    ),
    _r(
        "nature",
        "species",
        "species:species age:age count:count",
        (
            "The {species} can live for {age} years, and about {count} remain in the wild.",
            "Only around {count} are left in the wild, and each {species} may live {age} years.",
        ),
        (
            ("How long can the {species} live?", "age"),
            ("How many are left in the wild?", "count"),
            ("What is the lifespan of the {species} in years?", "age"),
        ),
        (("What is the wild population of the {species}?", "count"),),
    ),
)

SCIENCE = (
    _r(
        "science",
        "p",
        "p:person year:year org:org",
        (
            "The effect was first described by {p} at {org} in {year}.",
            "In {year}, {p}, working at {org}, was the first to describe the effect.",
        ),
        (
            ("Who first described the effect?", "p"),
            ("When was the effect first described?", "year"),
            ("Where did {p} work?", "org"),
            ("Who discovered it?", "p"),
        ),
        (("Which scientist gave the first account of the effect?", "p"),),
    ),
    _r(
        "science",
        "p",
        "p:person temperature:temperature speed:speed",
        (
            "The gas inside reaches {temperature} and moves at up to {speed}.",
            "Moving at up to {speed}, the gas heats to {temperature}.",
        ),
        (
            ("How hot does the gas get?", "temperature"),
            ("What temperature does the gas reach?", "temperature"),
            ("How fast does the gas move?", "speed"),
            ("What is the top speed of the gas?", "speed"),
        ),
        (("To what temperature is the gas heated?", "temperature"),),
    ),
    _r(
        "science",
        "p",
        "p:person reason:cause material:material",
        (
            "Cracks form in the {material} mostly because of {reason}.",
            "The main cause of cracks in the {material} is {reason}.",
        ),
        (
            ("What causes the cracks?", "reason"),
            ("Why does the {material} crack?", "reason"),
            ("In what material do the cracks form?", "material"),
        ),
        (("What is mainly to blame for the cracks?", "reason"),),
    ),
    _r(
        "science",
        "p",
        "p:person percent:percent count:count",
        (
            "In the trial of {count} patients, {percent} improved.",
            "Of the {count} patients in the trial, {percent} got better.",
        ),
        (
            ("How many patients took part in the trial?", "count"),
            ("What share of patients improved?", "percent"),
            ("What percentage got better?", "percent"),
        ),
        (("How large was the trial?", "count"),),
    ),
)

FOOD = (
    _r(
        "food",
        "dish",
        "dish:dish foods:foods count:few",
        (
            "For the {dish} you need {foods}; it serves {count}.",
            "The {dish} serves {count} and calls for {foods}.",
            "To make the {dish}, gather {foods}. The recipe feeds {count}.",
        ),
        (
            ("What ingredients does the {dish} need?", "foods"),
            ("What goes into the {dish}?", "foods"),
            ("How many people does the {dish} serve?", "count"),
            ("How many does the recipe feed?", "count"),
        ),
        (("What do you need to make the {dish}?", "foods"),),
    ),
    _r(
        "food",
        "dish",
        "dish:dish temperature:oven duration:span",
        (
            "Bake the {dish} at {temperature} for {duration}.",
            "The {dish} goes into the oven at {temperature} for {duration}.",
            "Cook it for {duration} in an oven heated to {temperature}.",
        ),
        (
            ("How long should the {dish} bake?", "duration"),
            ("How many {duration.unit} should the {dish} bake for?", "duration.number"),
            ("How long does it cook?", "duration"),
            ("At what temperature should the oven be?", "temperature"),
            ("How hot should the oven be for the {dish}?", "temperature"),
        ),
        (("For how much time does the {dish} stay in the oven?", "duration"),),
    ),
    _r(
        "food",
        "dish",
        "dish:dish weight:weight food:food other:food",
        (
            "Add {weight} of {food}; {other} works if you have none.",
            "The recipe uses {weight} of {food}, though {other} can stand in for it.",
        ),
        (
            ("How much {food} does the recipe use?", "weight"),
            ("How many {weight.unit} of {food} are needed?", "weight.number"),
            ("What can replace the {food}?", "other"),
            ("What can you use instead of {food}?", "other"),
        ),
        (("What quantity of {food} goes in?", "weight"),),
    ),
    _r(
        "food",
        "dish",
        "dish:dish duration:span reason:food",
        (
            "Let the dough rest for {duration} so that the {reason} can soak up the liquid.",
            "Rest the dough for {duration}; this lets the {reason} absorb the liquid.",
        ),
        (
            ("How long should the dough rest?", "duration"),
            ("Why should the dough rest?", "reason"),
            ("For how long is the dough left to rest?", "duration"),
        ),
        (("How much resting time does the dough need?", "duration"),),
    ),
)

PRODUCTS = (
    _r(
        "products",
        "product",
        "product:product power:power volume:volume",
        (
            "{product.Cap} draws {power} and holds {volume}.",
            "With a capacity of {volume}, {product} uses {power}.",
            "{product.Cap} has a {volume} tank and a {power} motor.",
        ),
        (
            ("How much power does {product} use?", "power"),
            ("What volume can {product} take?", "volume"),
            ("How much does the tank hold?", "volume"),
            ("What is the power rating of {product}?", "power"),
            ("How many {power.unit} does {product} draw?", "power.number"),
        ),
        (("How much can {product} hold?", "volume"),),
    ),
    _r(
        "products",
        "product",
        "product:product duration:period money:price",
        (
            "{product.Cap} costs {money} and comes with a {duration} warranty.",
            "Priced at {money}, {product} is covered by a warranty of {duration}.",
        ),
        (
            ("How much does {product} cost?", "money"),
            ("What is the price of {product}?", "money"),
            ("How long is the warranty?", "duration"),
            ("How many {duration.unit} of warranty come with {product}?", "duration.number"),
            ("For how long is {product} under guarantee?", "duration"),
        ),
        (("What does {product} sell for?", "money"),),
    ),
    _r(
        "products",
        "product",
        "product:product colour:colour frequency:frequency",
        (
            "Clean the filter {frequency}; a {colour} light shows when it is blocked.",
            "When the filter is blocked, a {colour} light comes on. It should be cleaned {frequency}.",
        ),
        (
            ("How often should the filter be cleaned?", "frequency"),
            ("What colour is the warning light?", "colour"),
            ("What shows that the filter is blocked?", "colour"),
        ),
        (("How frequently does the filter need cleaning?", "frequency"),),
    ),
    _r(
        "products",
        "product",
        "product:product duration:span count:few",
        (
            "To reset {product}, hold the power button for {duration}, then press it {count} times.",
            "Hold the power button for {duration} and press it {count} times to reset the device.",
        ),
        (
            ("How long should you hold the power button?", "duration"),
            ("How do you reset {product}? For how long is the button held?", "duration"),
            ("How many times do you press the button?", "count"),
        ),
        (("For what length of time must the power button be held?", "duration"),),
    ),
    _r(
        "products",
        "product",
        "product:product temperature:temperature other:temperature",
        (
            "Use {product} in rooms between {temperature} and {other}.",
            "{product.Cap} works best when the room is no colder than {temperature} and no warmer than {other}.",
        ),
        (
            ("What is the lowest room temperature for {product}?", "temperature"),
            ("What is the highest temperature it should be used at?", "other"),
        ),
        (("Below what temperature should {product} not be used?", "temperature"),),
    ),
)

TRANSPORT = (
    _r(
        "transport",
        "route",
        "route:route vehicle:vehicle frequency:frequency town:town",
        (
            "The number {route} {vehicle} to {town} runs {frequency}.",
            "Route {route} to {town} has a {vehicle} {frequency}.",
            "On route {route}, a {vehicle} leaves for {town} {frequency}.",
        ),
        (
            ("How often does the number {route} run?", "frequency"),
            ("Where does route {route} go?", "town"),
            ("How frequent is the service to {town}?", "frequency"),
            ("Which route goes to {town}?", "route"),
        ),
        (("What is the frequency of route {route}?", "frequency"),),
    ),
    _r(
        "transport",
        "route",
        "route:route time:time last:time",
        (
            "The first departure is at {time} and the last at {last}.",
            "Services start at {time}; the last one leaves at {last}.",
        ),
        (
            ("When is the first departure?", "time"),
            ("What time does the last service leave?", "last"),
            ("When does the last one go?", "last"),
            ("What time does the service start?", "time"),
        ),
        (("At what time does the earliest service leave?", "time"),),
    ),
    _r(
        "transport",
        "route",
        "route:route date:date reason:reason street:address",
        (
            "From {date}, services will not stop at {street} because {reason}.",
            "Because {reason}, the stop at {street} will be closed from {date}.",
        ),
        (
            ("Which stop will be closed?", "street"),
            ("Why will the stop be closed?", "reason"),
            ("From when will the stop be closed?", "date"),
            ("When does the change start?", "date"),
        ),
        (("What is the reason for closing the stop?", "reason"),),
    ),
    _r(
        "transport",
        "route",
        "route:route money:price child:price",
        (
            "A single fare is {money}, and a day ticket costs {child}.",
            "Day tickets are {child}; single journeys cost {money}.",
        ),
        (
            ("How much is a single fare?", "money"),
            ("What does a day ticket cost?", "child"),
            ("What is the price of one journey?", "money"),
        ),
        (("How much do you pay for a day ticket?", "child"),),
    ),
)

HISTORY = (
    _r(
        "history",
        "town",
        "town:town year:year duration:period p:person",
        (
            "In {year} the castle at {town} was besieged for {duration} by troops under {p}.",
            "The siege of {town} began in {year}, lasted {duration} and was led by {p}.",
            "{p} laid siege to {town} in {year}; it held out for {duration}.",
        ),
        (
            ("How long did the siege of {town} last?", "duration"),
            ("How many {duration.unit} did the siege of {town} last?", "duration.number"),
            ("When was {town} besieged?", "year"),
            ("Who led the siege of {town}?", "p"),
            ("Who commanded the attackers?", "p"),
            ("In which year did the siege begin?", "year"),
        ),
        (("For how long did {town} hold out?", "duration"),),
    ),
    _r(
        "history",
        "town",
        "town:town count:count other:count",
        (
            "The defenders numbered {count}, against an army of {other}.",
            "An army of {other} faced just {count} defenders.",
        ),
        (
            ("How many defenders were there?", "count"),
            ("How large was the attacking army?", "other"),
            ("How many soldiers attacked?", "other"),
        ),
        (("What was the size of the defending force?", "count"),),
    ),
    _r(
        "history",
        "town",
        "town:town p:person year:year language:language",
        (
            "The name {town} comes from {language} and was first recorded in {year}.",
            "First written down in {year}, the name {town} is {language} in origin.",
        ),
        (
            ("What language does the name {town} come from?", "language"),
            ("When was the name {town} first recorded?", "year"),
            ("What is the origin of the name {town}?", "language"),
        ),
        (("From which language is the name {town} taken?", "language"),),
    ),
    _r(
        "history",
        "town",
        "town:town year:year reason:reason",
        (
            "The port at {town} was abandoned in {year} because {reason}.",
            "Because {reason}, {town} lost its port in {year}.",
        ),
        (
            ("Why was the port at {town} abandoned?", "reason"),
            ("When was the port abandoned?", "year"),
            ("What happened to the port, and why?", "reason"),
        ),
        (("What caused {town} to give up its port?", "reason"),),
    ),
    _r(
        "history",
        "p",
        "p:person q:person year:year town:town",
        (
            "The treaty was signed at {town} in {year} by {p} and {q}.",
            "{p} and {q} put their names to the treaty at {town} in {year}.",
        ),
        (
            ("Where was the treaty signed?", "town"),
            ("When was the treaty signed?", "year"),
            ("Who signed the treaty with {p}?", "q"),
        ),
        (("In what year was the treaty agreed?", "year"),),
    ),
)

LEGAL = (
    _r(
        "legal",
        "firm",
        "firm:firm other:firm duration:period money:money",
        (
            "Either party may end the agreement by giving {duration} notice; early exit costs {money}.",
            "The agreement between {firm} and {other} can be ended on {duration} notice, with a fee of {money} for "
            "leaving early.",
        ),
        (
            ("How much notice is needed to end the agreement?", "duration"),
            ("What is the notice period?", "duration"),
            ("What is the fee for leaving early?", "money"),
            ("How much does early termination cost?", "money"),
        ),
        (("What penalty applies to ending the agreement early?", "money"),),
    ),
    _r(
        "legal",
        "p",
        "p:person firm:firm money:money date:date",
        (
            "On {date} the judge, {p}, ordered {firm} to pay {money} in damages.",
            "{firm.Cap} must pay {money} in damages, the court ruled on {date}.",
            "The court, on {date}, awarded damages of {money} against {firm}.",
        ),
        (
            ("How much must {firm} pay?", "money"),
            ("What damages were awarded?", "money"),
            ("When did the court rule?", "date"),
            ("On what date was the ruling given?", "date"),
        ),
        (("What sum was {firm} ordered to pay?", "money"),),
    ),
    _r(
        "legal",
        "p",
        "p:person q:person reason:reason",
        (
            "The appeal by {p} was dismissed because {reason}.",
            "{q}, for the council, argued that the appeal should fail because {reason}; the court agreed.",
        ),
        (
            ("Why was the appeal dismissed?", "reason"),
            ("Why did the appeal fail?", "reason"),
        ),
        (("On what grounds was the appeal rejected?", "reason"),),
    ),
)

WORK = (
    _r(
        "work",
        "firm",
        "firm:firm role:role money:money town:town",
        (
            "{firm} is hiring a {role} in {town} on a salary of {money}.",
            "Wanted: a {role} for our {town} office. Salary {money}.",
            "The {role} post, based in {town}, pays {money} a year.",
        ),
        (
            ("What is the salary?", "money"),
            ("How much does the job pay?", "money"),
            ("Where is the job based?", "town"),
            ("What position is being advertised?", "role"),
            ("Which role is {firm} hiring for?", "role"),
        ),
        (("What is the annual pay for the post?", "money"),),
    ),
    _r(
        "work",
        "firm",
        "firm:firm date:date p:person",
        (
            "Applications close on {date}; send them to {p}.",
            "Send your application to {p} by {date}.",
        ),
        (
            ("What is the closing date for applications?", "date"),
            ("Who should applications go to?", "p"),
            ("When is the deadline?", "date"),
        ),
        (("By what date must applications arrive?", "date"),),
    ),
    _r(
        "work",
        "firm",
        "firm:firm count:few duration:period",
        (
            "The job is {count} days a week, with {duration} of paid leave.",
            "Staff work {count} days a week and get {duration} of paid holiday.",
        ),
        (
            ("How many days a week is the job?", "count"),
            ("How much paid leave do staff get?", "duration"),
            ("How much holiday comes with the job?", "duration"),
        ),
        (("How many working days are there each week?", "count"),),
    ),
    _r(
        "work",
        "p",
        "p:person q:person count:few other:few",
        (
            "{p} chaired the meeting; the motion passed by {count} votes to {other}.",
            "With {p} in the chair, members voted {count} to {other} in favour.",
        ),
        (
            ("Who chaired the meeting?", "p"),
            ("Who was in the chair?", "p"),
            ("How many votes were cast in favour?", "count"),
            ("How many members voted against?", "other"),
        ),
        (("Who presided over the meeting?", "p"),),
    ),
    _r(
        "work",
        "p",
        "p:person money:money date:date",
        (
            "The committee agreed a budget of {money}; it will meet again on {date}.",
            "A budget of {money} was approved, and the next meeting is on {date}.",
        ),
        (
            ("What budget was agreed?", "money"),
            ("How much money was approved?", "money"),
            ("When is the next meeting?", "date"),
        ),
        (("When will the committee next meet?", "date"),),
    ),
)

REVIEWS = (
    _r(
        "reviews",
        "book",
        "book:book p:person count:count booktype:booktype",
        (
            "{book} is a {booktype} by {p}, and runs to {count} pages.",
            "{p}'s {booktype} {book} is {count} pages long.",
        ),
        (
            ("Which writer produced {book}?", "p"),
            ("How many pages does {book} have?", "count"),
            ("How long is the book?", "count"),
            ("What kind of book is {book}?", "booktype"),
        ),
        (("Who penned the {booktype}?", "p"),),
    ),
    _r(
        "reviews",
        "org",
        "org:org dish:dish money:price count:few",
        (
            "The {dish} at {org} costs {money} and easily feeds {count}.",
            "At {money}, the {dish} is enough for {count}.",
        ),
        (
            ("How much is the {dish}?", "money"),
            ("What does the {dish} cost?", "money"),
            ("For how many diners is the {dish} enough?", "count"),
        ),
        (("How much would the {dish} set you back?", "money"),),
    ),
    _r(
        "reviews",
        "org",
        "org:org p:person count:stars",
        (
            "The reviewer, {p}, gave it {count} stars out of five.",
            "{count} stars out of five, wrote the reviewer {p}.",
        ),
        (
            ("How many stars did it get?", "count"),
            ("What rating did {p} give?", "count"),
            ("Who reviewed it?", "p"),
        ),
        (("How many stars did the reviewer award?", "count"),),
    ),
)

REPORTS = (
    _r(
        "reports",
        "org",
        "org:org time:time cause:cause count:few",
        (
            "The fire at {org} started at {time} and was caused by {cause}; {count} people were hurt.",
            "Investigators blamed {cause} for the fire, which broke out at {time} and injured {count}.",
        ),
        (
            ("What caused the fire?", "cause"),
            ("When did the fire start?", "time"),
            ("What time did the fire break out?", "time"),
            ("How many people were injured?", "count"),
            ("How many were hurt in the fire?", "count"),
        ),
        (("What was the cause of the blaze?", "cause"),),
    ),
    _r(
        "reports",
        "org",
        "org:org duration:span count:few",
        (
            "Crews arrived within {duration} and {count} engines attended.",
            "{count} engines were sent, and the first arrived in {duration}.",
        ),
        (
            ("How quickly did crews arrive?", "duration"),
            ("How many engines were sent?", "count"),
            ("How long did it take the first crew to arrive?", "duration"),
        ),
        (("What was the response time?", "duration"),),
    ),
    _r(
        "reports",
        "town",
        "town:town temperature:temperature speed:speed percent:percent",
        (
            "Tomorrow {town} will see highs of {temperature}, winds of {speed} and a {percent} chance of rain.",
            "Expect a top temperature of {temperature} in {town}, with gusts of {speed}; the chance of rain is "
            "{percent}.",
        ),
        (
            ("How warm will it get in {town}?", "temperature"),
            ("What is the highest temperature expected?", "temperature"),
            ("How strong will the wind be?", "speed"),
            ("What is the chance of rain?", "percent"),
            ("How likely is rain?", "percent"),
        ),
        (("What top temperature is forecast for {town}?", "temperature"),),
    ),
    _r(
        "reports",
        "town",
        "town:town weather:weather weekday:weekday",
        (
            "On {weekday}, {weather} will reach {town}.",
            "{weather.Cap} is expected in {town} on {weekday}.",
        ),
        (
            ("What weather is expected on {weekday}?", "weather"),
            ("When will the {weather} arrive?", "weekday"),
        ),
        (("What is the forecast for {town} on {weekday}?", "weather"),),
    ),
)

HEALTH = (
    _r(
        "health",
        "product",
        "product:product count:few frequency:frequency weight:dose",
        (
            "Adults should take {count} tablets of {weight} {frequency}.",
            "The dose for adults is {count} tablets ({weight} each), taken {frequency}.",
        ),
        (
            ("How many tablets should adults take?", "count"),
            ("How often should the tablets be taken?", "frequency"),
            ("How strong is each tablet?", "weight"),
        ),
        (("What is the adult dose?", "count"),),
    ),
    _r(
        "health",
        "product",
        "product:product symptom:symptom other:symptom",
        (
            "Common side effects are {symptom}; see a doctor if you notice {other}.",
            "Some people get {symptom}. If you have {other}, contact your doctor.",
        ),
        (
            ("What is a common side effect?", "symptom"),
            ("When should you see a doctor?", "other"),
            ("Which symptom means you should contact a doctor?", "other"),
        ),
        (("What side effect do some people get?", "symptom"),),
    ),
    _r(
        "health",
        "product",
        "product:product food:food age:age",
        (
            "Do not give it to children under {age}, and avoid {food} while taking it.",
            "It is not suitable for children under {age}. Avoid {food} during the course.",
        ),
        (
            ("What should you avoid while taking it?", "food"),
            ("Below what age should children not take it?", "age"),
            ("What is the minimum age?", "age"),
        ),
        (("Which food should be avoided during the course?", "food"),),
    ),
)

TECH = (
    _r(
        "tech",
        "product",
        "product:product version:version date:date feature:feature",
        (
            "Version {version}, released on {date}, adds {feature}.",
            "Released on {date}, version {version} brings {feature}.",
            "{feature.Cap} arrives in version {version} ({date}).",
        ),
        (
            ("What does version {version} add?", "feature"),
            ("When was version {version} released?", "date"),
            ("Which version added {feature}?", "version"),
            ("What new feature came in {version}?", "feature"),
        ),
        (("Version {version} came out on which date?", "date"),),
    ),
    _r(
        "tech",
        "product",
        "product:product version:version bug:bug",
        (
            "Version {version} fixes {bug}.",
            "The {version} release repairs {bug} that users had reported.",
        ),
        (
            ("What does version {version} fix?", "bug"),
            ("Which bug was fixed in {version}?", "bug"),
            ("Which release fixes {bug}?", "version"),
        ),
        (("What problem was solved in version {version}?", "bug"),),
    ),
    _r(
        "tech",
        "product",
        "product:product data:data version:version",
        (
            "From version {version}, the app needs {data} of free space.",
            "It now needs {data} of storage, starting with version {version}.",
        ),
        (
            ("How much free space does the app need?", "data"),
            ("How much storage is required?", "data"),
            ("How many {data.unit} of space does the app need?", "data.number"),
            ("From which version does the new requirement apply?", "version"),
        ),
        (("What amount of disk space is needed?", "data"),),
    ),
)

CULTURE = (
    _r(
        "culture",
        "book",
        "book:book material:material year:year p:person",
        (
            "The bowl called {book} was made of {material} in about {year} by {p}.",
            "Made by {p} around {year}, {book} is carved from {material}.",
        ),
        (
            ("What is {book} made of?", "material"),
            ("When was {book} made?", "year"),
            ("Who made {book}?", "p"),
            ("From what material was {book} carved?", "material"),
        ),
        (("Which material was used for {book}?", "material"),),
    ),
    _r(
        "culture",
        "book",
        "book:book p:person year:year org:org",
        (
            "It was given to {org} by {p} in {year}.",
            "{p} donated {book} to {org} in {year}.",
        ),
        (
            ("Who donated {book}?", "p"),
            ("Who gave it to {org}?", "p"),
            ("When was it donated?", "year"),
        ),
        (("Who presented {book} to {org}?", "p"),),
    ),
    _r(
        "culture",
        "book",
        "book:book language:language alias:alias year:year",
        (
            "The word comes from the {language} {alias}, meaning a small boat, and was first used in English in "
            "{year}.",
            "First recorded in English in {year}, it derives from {language} {alias}.",
        ),
        (
            ("Which language does the word come from?", "language"),
            ("When was the word first used in English?", "year"),
            ("What is the origin of the word?", "language"),
        ),
        (("From what language is the word borrowed?", "language"),),
    ),
    _r(
        "culture",
        "org",
        "org:org pieces:pieces count:few other:few",
        (
            "Each player starts with {count} {pieces}; the first to collect {other} wins.",
            "Players begin with {count} {pieces}, and whoever gathers {other} first is the winner.",
        ),
        (
            ("How many {pieces} does each player start with?", "count"),
            ("How many do you need to win?", "other"),
            ("What do players collect?", "pieces"),
        ),
        (("How many {pieces} are needed to win the game?", "other"),),
    ),
)

# Facts of no particular domain, mixed into paragraphs of every domain: people named with their role, rules
# (if ..., then ...), figures that changed, careers in order, purposes, lists of names, what did not happen.
COMMON = (
    _r(
        "common",
        "service",
        "service:service time:time close:time weekday:weekday",
        (
            "{service.Cap} is open from {time} to {close}, but not on {weekday}s.",
            "{service.Cap} opens at {time} and closes at {close}; it is shut on {weekday}s.",
            "From {time} until {close} (except {weekday}s), {service} is available.",
        ),
        (
            ("When does {service} open?", "time"),
            ("What time does {service} close?", "close"),
            ("Until when is {service} open?", "close"),
            ("When can you not use {service}?", "weekday"),
            ("What time does {service} start?", "time"),
        ),
        (("At what time does {service} finish?", "close"),),
    ),
    _r(
        "common",
        "p",
        "p:person town:town other:town month:month days:count compound:compound",
        (
            "{p} set out from {town} in {month} and reached {other} {days} days later, a {compound} trip.",
            "The {compound} journey took {p} from {town} to {other}; it began in {month} and lasted {days} days.",
            "Leaving {town} in {month}, {p} arrived in {other} after {days} days on the road.",
        ),
        (
            ("Where did {p}'s journey start?", "town"),
            ("Where did {p} set off from?", "town"),
            ("Where did {p} end up?", "other"),
            ("How many days did the trip take?", "days"),
            ("How long was {p}'s journey?", "compound"),
            ("In which month did {p} leave?", "month"),
        ),
        (("What was the destination of {p}'s journey?", "other"),),
    ),
    _r(
        "common",
        "thing",
        "thing:award duration:span cause:cause",
        (
            "The {thing} ceremony was delayed by {duration} because of {cause}.",
            "Owing to {cause}, the {thing} ceremony started {duration} late.",
            "{cause.Cap} held up the {thing} ceremony for {duration}.",
        ),
        (
            ("Why was the {thing} ceremony delayed?", "cause"),
            ("What held up the {thing} ceremony?", "cause"),
            ("How long was the ceremony delayed?", "duration"),
        ),
        (("What caused the delay to the {thing} ceremony?", "cause"),),
    ),
    _r(
        "common",
        "org",
        "org:org subjects:subjects",
        (
            "Applicants to {org} need a degree in {subjects}.",
            "{org.Cap} accepts graduates in {subjects}.",
        ),
        (
            ("Which subjects does {org} accept?", "subjects"),
            ("What degree do applicants need?", "subjects"),
        ),
        (("Graduates in which subjects may apply?", "subjects"),),
    ),
    _r(
        "common",
        "org",
        "org:org count:few date:date money:price",
        (
            "Your booking at {org} is for {count} nights from {date}, at {money} per night.",
            "We look forward to seeing you at {org} on {date} for {count} nights; the rate is {money} a night.",
        ),
        (
            ("How many nights is the booking for?", "count"),
            ("When does the stay begin?", "date"),
            ("What is the nightly rate?", "money"),
            ("How much does one night cost?", "money"),
        ),
        (("For how many nights is the reservation?", "count"),),
    ),
    _r(
        "common",
        "p",
        "p:person role:role org:org",
        (
            "{p}, the {role} of {org}, said the results were encouraging.",
            '"We are delighted," said {role} {p}.',
            "The {role}, {p}, described the year as difficult.",
            "Speaking for {org}, its {role} {p} promised a full review.",
        ),
        (
            ("Who holds the post of {role}?", "p"),
            ("What is {p}'s role?", "role"),
            ("What job does {p} do?", "role"),
            ("Who spoke as {role}?", "p"),
        ),
        (("Which post does {p} hold?", "role"),),
    ),
    _r(
        "common",
        "rule",
        "rule:rule",
        (
            "If {rule.cond}, {rule}.",
            "Please note: if {rule.cond}, {rule}.",
        ),
        (
            ("What happens if {rule.cond}?", "rule"),
            ("What should be done if {rule.cond}?", "rule"),
            ("What is the rule when {rule.cond}?", "rule"),
        ),
        (("What follows if {rule.cond}?", "rule"),),
    ),
    _r(
        "common",
        "thing",
        "thing:moneything old:money new:money year:year",
        (
            "{thing.Cap} rose from {old} to {new} in {year}.",
            "In {year} {thing} went up to {new}, from {old}.",
            "{thing.Cap} fell to {new} in {year}, down from {old}.",
        ),
        (
            ("What is {thing} now?", "new"),
            ("What was {thing} before {year}?", "old"),
            ("How much was {thing} before the change?", "old"),
            ("What did {thing} change to in {year}?", "new"),
        ),
        (("What was the earlier figure for {thing}?", "old"),),
    ),
    _r(
        "common",
        "thing",
        "thing:countthing old:count new:count",
        (
            "{thing.Cap} grew from {old} to {new}.",
            "{thing.Cap} has reached {new}, against {old} a year earlier.",
            "{thing.Cap} dropped to {new}, from {old}.",
        ),
        (
            ("What is {thing} now?", "new"),
            ("What was {thing} before?", "old"),
            ("What figure did {thing} reach?", "new"),
        ),
        (("What was the previous figure for {thing}?", "old"),),
    ),
    _r(
        "common",
        "p",
        "p:person firm:firm other:firm duration:period",
        (
            "Before joining {firm}, {p} spent {duration} at {other}.",
            "{p} came to {firm} after {duration} with {other}.",
            "{p.Pron} had worked at {other} for {duration} before moving to {firm}.",
        ),
        (
            ("Where did {p} work before joining {firm}?", "other"),
            ("How long was {p} at {other}?", "duration"),
            ("For how many {duration.unit} was {p} with {other}?", "duration.number"),
            ("Which employer did {p} leave for {firm}?", "other"),
        ),
        (("What was {p}'s previous employer?", "other"),),
    ),
    _r(
        "common",
        "p",
        "p:person purpose:purpose material:material",
        (
            "{p} lined the walls with {material} {purpose}.",
            "{purpose.Cap}, {p} lined the walls with {material}.",
        ),
        (
            ("Why did {p} line the walls?", "purpose"),
            ("What did {p} line the walls with?", "material"),
            ("For what reason were the walls lined?", "purpose"),
        ),
        (("What was the purpose of lining the walls?", "purpose"),),
    ),
    _r(
        "common",
        "org",
        "org:org people:people count:few",
        (
            "The committee of {org} has {count} members, among them {people}.",
            "Among the {count} members of the committee of {org} are {people}.",
        ),
        (
            ("Who sits on the committee of {org}?", "people"),
            ("Name the committee members mentioned.", "people"),
            ("How many members does the committee have?", "count"),
        ),
        (("Which people are on the committee?", "people"),),
    ),
    _r(
        "common",
        "p",
        "p:person q:person date:date",
        (
            "{p} could not attend on {date}, so {q} went in {p.pos} place.",
            "In the absence of {p} on {date}, {q} stood in.",
            "{q}, not {p}, represented the group on {date}.",
        ),
        (
            ("Who went in place of {p}?", "q"),
            ("Who stood in for {p}?", "q"),
            ("Who represented the group on {date}?", "q"),
        ),
        (("Who replaced {p} on {date}?", "q"),),
    ),
    _r(
        "common",
        "p",
        "p:person q:person month:month org:org years:few",
        (
            "{p} retires in {month} after {years} years; {p.pos} successor, {q}, joins from {org}.",
            "After {years} years in the job, {p} will retire in {month} and be replaced by {q} of {org}.",
            "{q} arrives from {org} to take over from {p}, who retires in {month}.",
        ),
        (
            ("Who is retiring?", "p"),
            ("Who will take over from {p}?", "q"),
            ("When does {p} retire?", "month"),
            ("Where is {q} coming from?", "org"),
            ("Who is the new person replacing {p}?", "q"),
        ),
        (("Who succeeds {p}?", "q"),),
    ),
    _r(
        "common",
        "p",
        "p:person compound:compound thing:booktype",
        (
            "{p} has just finished a {compound} project.",
            "The {compound} project was led by {p}.",
        ),
        (
            ("How long was the project that {p} finished?", "compound"),
            ("Who led the {compound} project?", "p"),
            ("How many {compound.unit} did the project run to?", "compound.number"),
        ),
        (("What size was {p}'s project?", "compound"),),
    ),
    _r(
        "common",
        "reference",
        "reference:reference p:person date:date",
        (
            "Please quote reference {reference} in any reply to {p} before {date}.",
            "{p} asks that replies, by {date}, give the reference {reference}.",
        ),
        (
            ("What reference should replies quote?", "reference"),
            ("What is the reference number?", "reference"),
            ("Who should replies go to?", "p"),
            ("By when must replies be sent?", "date"),
        ),
        (("Which reference code must be given?", "reference"),),
    ),
)

POLITICS = (
    _r(
        "politics",
        "p",
        "p:person town:town count:count margin:count q:person",
        (
            "{p} won the {town} seat with {count} votes, a majority of {margin} over {q}.",
            "With {count} votes, {p} took {town}, beating {q} by {margin}.",
            "{q} lost {town} to {p} by {margin} votes; the winner polled {count}.",
        ),
        (
            ("Who won the {town} seat?", "p"),
            ("Who was elected in {town}?", "p"),
            ("How many votes did {p} get?", "count"),
            ("What was the winning margin?", "margin"),
            ("Who was the runner-up in {town}?", "q"),
            ("Who came second?", "q"),
        ),
        (("By how many votes did {p} win?", "margin"),),
    ),
    _r(
        "politics",
        "town",
        "town:town percent:percent year:year",
        (
            "Turnout in {town} was {percent}, the lowest since {year}.",
            "Only {percent} of voters in {town} took part, fewer than at any time since {year}.",
        ),
        (
            ("What was the turnout in {town}?", "percent"),
            ("How many voters took part, as a share?", "percent"),
            ("Since when had turnout not been so low?", "year"),
        ),
        (("What proportion of the electorate voted in {town}?", "percent"),),
    ),
    _r(
        "politics",
        "p",
        "p:person reason:reason town:town",
        (
            "The vote in {town} was called after {p} stood down because {reason}.",
            "{p} resigned the {town} seat because {reason}, which forced the vote.",
        ),
        (
            ("Why did {p} stand down?", "reason"),
            ("Who resigned the {town} seat?", "p"),
        ),
        (("What led {p} to resign?", "reason"),),
    ),
    _r(
        "politics",
        "p",
        "p:person profession:profession issue:purpose",
        (
            "{p}, a former {profession}, has promised to act {issue}.",
            "Before politics {p} worked as a {profession}.",
        ),
        (
            ("What did {p} do before entering politics?", "profession"),
            ("What was {p}'s job before politics?", "profession"),
        ),
        (("Which profession did {p} leave for politics?", "profession"),),
    ),
    _r(
        "politics",
        "team",
        "team:team ordinal:ordinal other:team event:award",
        (
            "{team} finished {ordinal} in the {event}, just behind {other}.",
            "{other} pipped {team} to {ordinal} place in the {event}.",
        ),
        (
            ("Where did {team} finish in the {event}?", "ordinal"),
            ("In what place did {team} come?", "ordinal"),
            ("Who finished just ahead of {team}?", "other"),
        ),
        (("What position did {team} reach in the {event}?", "ordinal"),),
    ),
)

HOME = (
    _r(
        "home",
        "plant",
        "plant:plant month:month size:size",
        (
            "Plant {plant} in {month}, {size} apart.",
            "{plant.Cap} goes in during {month}; leave {size} between plants.",
        ),
        (
            ("When should {plant} be planted?", "month"),
            ("How far apart should {plant} be planted?", "size"),
            ("In which month does {plant} go in?", "month"),
        ),
        (("What spacing does {plant} need?", "size"),),
    ),
    _r(
        "home",
        "plant",
        "plant:plant material:material place:plant",
        (
            "Store the cuttings in dry {material} somewhere cool, away from the {place}.",
            "Keep cuttings in {material}, out of reach of the {place}.",
        ),
        (
            ("What should the cuttings be stored in?", "material"),
            ("Where should cuttings be kept?", "material"),
        ),
        (("In what should the cuttings be kept?", "material"),),
    ),
    _r(
        "home",
        "compound",
        "compound:compound money:money town:town",
        (
            "A {compound} house in {town} is for sale at {money}.",
            "On the market for {money}: a {compound} home on the edge of {town}.",
        ),
        (
            ("How much is the house in {town}?", "money"),
            ("What is the asking price?", "money"),
            ("Where is the house?", "town"),
            ("How many {compound.unit} does the house have?", "compound.number"),
        ),
        (("What does the {compound} house cost?", "money"),),
    ),
)

DOMAINS: dict[str, tuple[Relation, ...]] = {
    "politics": POLITICS,
    "home": HOME,
    "people": PEOPLE,
    "business": BUSINESS,
    "sport": SPORT,
    "events": EVENTS,
    "places": PLACES,
    "geography": GEOGRAPHY,
    "nature": NATURE,
    "science": SCIENCE,
    "food": FOOD,
    "products": PRODUCTS,
    "transport": TRANSPORT,
    "history": HISTORY,
    "legal": LEGAL,
    "work": WORK,
    "reviews": REVIEWS,
    "reports": REPORTS,
    "health": HEALTH,
    "tech": TECH,
    "culture": CULTURE,
}
ALL_RELATIONS: tuple[Relation, ...] = tuple(r for relations in DOMAINS.values() for r in relations) + COMMON

# Sentences with no facts, mixed into paragraphs so that not every sentence answers a question.
FILLERS: tuple[str, ...] = (
    "The region is known for its mild winters.",
    "Local newspapers covered the story for weeks.",
    "Many visitors arrive there every summer.",
    "Historians still argue about the details.",
    "A small museum now tells the whole story.",
    "Trade along the coast grew steadily in those years.",
    "Details may change, so check before you travel.",
    "Nobody expected the plan to work so well.",
    "The figures were confirmed later by an independent audit.",
    "Further information is available at the front desk.",
    "Some of the older records were lost in a flood.",
    "Critics were divided at first.",
    "The work took longer than anyone had planned.",
    "Parking nearby is limited.",
    "Several questions remain unanswered.",
    "It was a cold, grey morning.",
)
