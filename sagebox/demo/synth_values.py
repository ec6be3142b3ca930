"""Slot values for the generated QA data: word lists written for Sagebox and makers of surface strings by kind.

A value has a main text and named forms ("last" name, "short" firm name, pronouns), so a paragraph can name an
entity in full once and shorter later, as people write. Each word list is split by position: every fifth item is
kept for the dev split only, so dev questions are about names and things training never saw.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar


def _words(text: str) -> tuple[str, ...]:
    """A word list written one item per `|` (items may hold spaces)."""
    return tuple(item.strip() for item in text.split("|") if item.strip())


FIRST_NAMES_F = _words(
    "Edith|Amara|Ingrid|Sofia|Mei|Fatima|Olga|Priya|Hannah|Lucia|Grace|Noor|Yuki|Chloe|Ama|Rosa|Elena|Tamsin|"
    "Beatrix|Leila|Agnes|Maud|Nadia|Freya|Ines|Zainab|Clara|Siobhan|Anouk|Marta|Kofi|Esme|Ruth|Delia|Harriet|"
    "Imogen|Wanjiru|Greta|Carmen|Helga|Ottilie|Ayesha|Joan|Lorna|Mabel|Petra|Rhiannon|Sunita|Thandiwe|Vera"
)
FIRST_NAMES_M = _words(
    "Tomas|Arjun|Felix|Henrik|Kwame|Luis|Pavel|Samir|Oliver|Rafael|Dmitri|Hugo|Ewan|Jonas|Idris|Mateo|Kenji|"
    "Callum|Bruno|Emeka|Ansel|Viktor|Declan|Oskar|Ravi|Stefan|Gideon|Malik|Anton|Rory|Silas|Laszlo|Nikhil|Elias|"
    "Cyril|Duncan|Florian|Gareth|Ibrahim|Jasper|Lorcan|Magnus|Niall|Otto|Piers|Quentin|Rohan|Tobias|Wilfred|Yusuf"
)
SURNAMES = _words(
    "Marlow|Okonjo|Lindqvist|Haddad|Fenwick|Tanaka|Moreau|Castellano|Ashby|Novak|Kowalski|Brennan|Osei|Petrov|"
    "Whitcombe|Rahman|Delacroix|Holt|Abernathy|Varga|Quinlan|Mbeki|Sorensen|Pryce|Albrecht|Nakamura|Oyelaran|"
    "Fairbairn|Costa|Hargreaves|Iqbal|Jansen|Kerrigan|Lachance|Mendes|Nyberg|Ostrowski|Pellegrini|Radcliffe|"
    "Szabo|Thornbury|Ueda|Valdez|Wainwright|Yilmaz|Zeller|Blackwood|Carver|Dunmore|Ellery|Galloway|Huxley|Inglis|"
    "Kinsella|Lowther|Merriman|Northcott|Penrose|Rowntree|Sedgwick|Tennant|Underhill|Vickery|Winslow|Gatti"
)
TITLES = _words("Dr|Professor|Captain|Judge|Sergeant|Reverend|Councillor|Inspector")
TOWN_STEMS = _words(
    "Ash|Bram|Cold|Dun|Elm|Fern|Glen|Hart|Ivy|Kel|Lang|Marsh|North|Oak|Pen|Queen|Red|Stan|Thorn|Ux|Wey|Yar|"
    "Bex|Calder|Drum|Ferris|Gilling|Harrow|Kings|Lynd|Millbr|Nether|Orms|Pol|Raven|Shep|Tarn|Upton|Wald|Bourne"
)
TOWN_ENDS = _words("ford|bury|ley|wick|ham|field|mouth|haven|by|stead|combe|dale|minster|port|well|ton|worth|gate")
COUNTRIES = _words(
    "Norway|Portugal|Kenya|Chile|Vietnam|Ghana|Peru|Finland|Morocco|Canada|Poland|Ireland|Japan|Egypt|Mexico|"
    "Austria|Nigeria|Greece|Malaysia|Denmark|Argentina|Tanzania|Iceland|Uruguay|Hungary|Ecuador|Senegal|Estonia|"
    "Nepal|Belgium|Colombia|Namibia|Croatia|Mongolia|Jordan|Bolivia|Zambia|Latvia|Cambodia|Tunisia"
)
CITIES = _words(
    "Lisbon|Oslo|Nairobi|Lyon|Krakow|Porto|Bergen|Seville|Leeds|Cork|Turin|Ghent|Dundee|Graz|Malmo|Bristol|"
    "Accra|Valencia|Osaka|Quebec|Tallinn|Perth|Bilbao|Riga|Hamburg|Geneva|Kyoto|Lagos|Bologna|Cardiff|Aarhus|"
    "Brno|Salzburg|Tampere|Utrecht|Vilnius|Zagreb|Durban|Hobart|Halifax"
)
PROFESSIONS = _words(
    "architect|botanist|carpenter|chemist|diplomat|engineer|geologist|historian|journalist|librarian|"
    "mathematician|midwife|navigator|painter|pharmacist|photographer|pilot|potter|sculptor|surgeon|teacher|"
    "translator|veterinarian|watchmaker|weaver|nurse|baker|lawyer|accountant|electrician|plumber|astronomer|"
    "economist|firefighter|gardener|glassblower|locksmith|optician|physicist|printer"
)
ROLES = _words(
    "chief executive|head teacher|finance director|club captain|head chef|chief engineer|museum director|"
    "project manager|lead designer|chair of the board|press officer|site manager|head coach|editor|"
    "harbour master|chief librarian|operations manager|treasurer|general manager|principal investigator"
)
FIRM_ENDS = _words(
    "Logistics|Bakery|Pharmaceuticals|Engineering|Textiles|Brewery|Instruments|Publishing|Foods|Motors|Energy|"
    "Software|Ceramics|Shipping|Robotics|Analytics|Furniture|Optics|Dairies|Aviation|Paints|Glassworks|Press|"
    "Holdings|Mills|Studios|Systems|Labs|Works|Group"
)
ORG_KINDS = _words(
    "Rowing Club|Chamber Choir|Historical Society|Football Club|Film Society|Rescue Centre|Housing Trust|"
    "Tenants' Association|Cycling Club|Chess Club|Allotment Society|Theatre Company|Wildlife Trust|Sailing Club"
)
INSTITUTION_KINDS = _words("Hospital|College|Library|Museum|Observatory|Academy|School|Gallery|Institute|Theatre")
STREETS = _words("Mill Lane|Station Road|Quay Street|Church Walk|Market Square|Harbour Road|Bridge Street|Elm Row")
FOODS = _words(
    "flour|butter|sugar|eggs|milk|honey|yeast|salt|oats|lentils|garlic|onions|carrots|rice|cream|cheese|"
    "almonds|lemons|ginger|tomatoes|spinach|chickpeas|mushrooms|potatoes|leeks|barley|walnuts|raisins|parsley|"
    "cumin|paprika|cinnamon|vinegar|yoghurt|apples|pears|plums|beans|peas|basil"
)
DISHES = _words(
    "lentil soup|apple tart|fish stew|barley bread|mushroom risotto|plum cake|leek pie|chickpea curry|"
    "walnut loaf|lemon pudding|onion tart|potato gratin|ginger biscuits|bean casserole|oat pancakes"
)
MATERIALS = _words(
    "oak|bronze|marble|limestone|copper|glass|silver|walnut|clay|iron|ivory|jade|pewter|slate|granite|linen|"
    "silk|wool|leather|porcelain|brass|ash|pine|sandstone|tin"
)
ANIMALS = _words(
    "heron|badger|otter|kestrel|hedgehog|seal|curlew|beaver|lynx|salmon|newt|swift|stoat|osprey|puffin|"
    "dormouse|vole|plover|crane|marten|toad|eel|bittern|lapwing|grebe|pike|wren|owl|hare|bat"
)
PLANTS = _words(
    "heather|bracken|reed|sedge|willow|birch|alder|hazel|gorse|moss|fern|clover|thistle|nettle|bramble|"
    "juniper|sorrel|rush|yew|larch"
)
INSTRUMENTS = _words("cello|violin|oboe|harp|trumpet|accordion|clarinet|bassoon|flute|mandolin|piano|drums|tuba")
SPORTS = _words("hockey|rugby|netball|cricket|football|basketball|volleyball|handball|water polo|lacrosse")
COLOURS = _words("green|crimson|amber|violet|indigo|silver|orange|teal|grey|yellow|blue|black|white|red|brown")
LANGUAGES = _words(
    "Latin|Greek|Old Norse|Arabic|Dutch|Welsh|Portuguese|Persian|Turkish|Hindi|Gaelic|Swahili|Basque|Malay"
)
WEEKDAYS = _words("Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday")
MONTHS = _words("January|February|March|April|May|June|July|August|September|October|November|December")
SEASONS = _words("spring|summer|autumn|winter")
COUNT_WORDS = _words("two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty")
FRACTIONS = _words(
    "over half|about a third|nearly a quarter|almost two thirds|roughly a tenth|more than three quarters|"
    "just under half|about a fifth|some two fifths"
)
ORDINALS = _words("second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth")
AWARDS = _words(
    "Gold Medal|Founders' Prize|Harcourt Award|Silver Quill|Lindley Medal|Young Maker Prize|Civic Trust Award|"
    "Fenton Cup|Royal Warrant|Pemberton Prize|Blue Ribbon|Golden Lantern"
)
PRODUCT_KINDS = _words(
    "dehumidifier|kettle|heater|air purifier|food mixer|electric drill|coffee grinder|lawn mower|washing machine|"
    "baby monitor|smoke alarm|e-bike|water filter|hair dryer|sewing machine|pressure cooker"
)
SYMPTOMS = _words(
    "headaches|a dry mouth|drowsiness|nausea|a rash|dizziness|stomach pain|blurred vision|swollen ankles|"
    "a racing heartbeat|trouble sleeping|a sore throat"
)
WEATHER = _words("heavy rain|sleet|thunderstorms|fog|light snow|strong winds|hail|drizzle|frost|bright sunshine")
VEHICLES = _words("bus|tram|ferry|train|coach|shuttle")
GAME_PIECES = _words("cards|dice|tokens|tiles|counters|coins|pawns")
SUBJECTS = _words(
    "chemistry|music|law|medicine|economics|history|architecture|geology|philosophy|engineering|botany|physics"
)
BOOK_KINDS = _words("novel|memoir|biography|cookbook|collection of poems|travel book|history|field guide")
BOOK_WORDS = _words(
    "Salt|River|Winter|Glass|Harbour|Silence|Orchard|Lantern|Tides|Stone|Kestrel|Embers|Marsh|Hours|Letters|"
    "Garden|Bridge|Shadow|Island|Ashes|Compass|Thread|Ledger|Anchor"
)
REASONS = _words(
    "the bridge was closed for repairs|the roof had started to leak|too few tickets had been sold|"
    "the river had flooded the car park|the lease on the old building ran out|a storm brought down the power lines|"
    "the supplier went out of business|the council cut its grant|the lead singer had lost her voice|"
    "demand had doubled in two years|the old machines kept breaking down|the site was needed for new housing|"
    "the stairs were too steep for older visitors|the water supply was contaminated|"
    "the contractor missed the deadline|prices for raw materials had risen sharply|"
    "the harbour silted up|the founder wanted to retire|the ground was too wet to play on|"
    "staff were needed at the new depot|the software had a security flaw|the building failed a fire inspection"
)
CAUSES = _words(
    "a faulty heater|a burst water pipe|an unattended candle|a lightning strike|a loose electrical cable|"
    "ice on the road|a blocked drain|worn brake pads|a gas leak|a fallen tree|a cracked weld|an overloaded socket"
)
FEATURES = _words(
    "dark mode|offline maps|a search bar|two-factor login|automatic backups|voice control|a sleep timer|"
    "shared playlists|a night setting|a child lock|export to PDF|a battery saver"
)
BUGS = _words(
    "a crash on start-up|slow loading of large files|a memory leak|wrong dates in reports|lost settings after "
    "updates|a frozen screen on resume|duplicate notifications|broken links in emails|a login loop|garbled "
    "characters in file names"
)

# (condition, what to do or what follows): a value's text is the second part, its "cond" form the first.
RULES = (
    ("the alarm sounds", "leave the building by the nearest exit"),
    ("you miss the last bus", "call the night taxi service"),
    ("the light turns red", "switch the machine off at the wall"),
    ("you lose your card", "report it at the front desk within a day"),
    ("a parcel arrives damaged", "refuse it and tell the driver"),
    ("the river rises above the marker", "the footpath is closed"),
    ("you cancel after the deadline", "the deposit is kept"),
    ("a player drops the ball", "the other side takes a free throw"),
    ("the dough is sticky", "add a spoonful of flour"),
    ("payment is late", "a fee of ten per cent is added"),
    ("the screen goes blank", "hold the reset button for ten seconds"),
    ("a tenant leaves early", "the rent for the notice period is still due"),
    ("you feel dizzy", "sit down and drink some water"),
    ("the ferry is full", "foot passengers wait for the next sailing"),
    ("it rains on the day", "the concert moves into the church hall"),
    ("the meeting is not quorate", "the vote is postponed"),
    ("a smell of gas is noticed", "open the windows and call the emergency line"),
    ("the password is entered wrongly three times", "the account is locked for an hour"),
    ("the ice is thinner than ten centimetres", "skating is not allowed"),
    ("the kettle boils dry", "it switches itself off"),
)
# Things that are measured and change: (noun phrase, value kind).
MEASURES = (
    ("the price of a season ticket", "money"),
    ("membership", "count"),
    ("the monthly rent", "money"),
    ("the water level", "size"),
    ("the number of pupils", "count"),
    ("the average journey time", "span"),
    ("the top speed", "speed"),
    ("annual rainfall", "size"),
    ("the waiting list", "count"),
    ("the entry fee", "money"),
    ("the yearly budget", "money"),
    ("the average house price", "money"),
    ("daily visitor numbers", "count"),
    ("the length of the queue", "span"),
)
SERVICES = _words(
    "breakfast|lunch|the bar|the pool|the library|the shop|reception|the café|the sauna|the ticket office|"
    "the help desk|the car park|the gift shop|dinner|the crèche"
)
PURPOSES = _words(
    "so that the paint would dry evenly|so that children could reach the shelves|to keep the rain out|"
    "to save money on heating|so that deliveries could arrive at night|to stop the banks from washing away|"
    "to make room for a second kitchen|so that the choir could rehearse in winter|to protect the eggs from foxes|"
    "to cut the waiting time in half|so that buses could turn round|to keep the stock cool in summer"
)


T = TypeVar("T")


def split_items(items: Sequence[T], split: str) -> Sequence[T]:
    """Every fifth item is reserved for the dev split; the other four fifths are for training."""
    dev = split == "dev"
    chosen = [item for i, item in enumerate(items) if (i % 5 == 4) == dev]
    return chosen or items


_SYLLABLES = _words(
    "ka|lo|mi|ren|tas|vel|dor|in|sa|bri|ol|fen|ga|ru|zel|mar|nov|qui|thal|ev|ar|bel|cor|da|el|fi|gor|hal|is|jo|"
    "kel|lum|mor|na|or|pe|ril|su|tor|ul|va|wen|xa|yor|zu|an|ber|cal|den|er|fal|gil|han|ist|jar"
)


def coined(rng: random.Random, low: int, high: int) -> str:
    """A made-up word from syllables, capitalised: names no list holds."""
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(low, high))).capitalize()


@dataclass(frozen=True)
class Value:
    text: str
    forms: dict[str, str] = field(default_factory=dict)
    # Written right after the value in a sentence but not part of it (an answer): e.g. a unit conversion.
    suffix: str = ""

    def form(self, name: str) -> str:
        if not name:
            return self.text
        return self.forms.get(name, self.text)


@dataclass(frozen=True)
class Maker:
    """Builds a value of one kind; `entity` kinds may be named again by later facts of the same paragraph."""

    make: Callable[[random.Random, str], Value]
    entity: bool = False


def _pick(items: Sequence[str]) -> Callable[[random.Random, str], Value]:
    return lambda rng, split: Value(rng.choice(split_items(items, split)))


def _person(rng: random.Random, split: str) -> Value:
    female = rng.random() < 0.5
    firsts = FIRST_NAMES_F if female else FIRST_NAMES_M
    first = rng.choice(split_items(firsts, split)) if rng.random() < 0.8 else coined(rng, 2, 2)
    last = rng.choice(split_items(SURNAMES, split)) if rng.random() < 0.7 else coined(rng, 2, 3)
    full = f"{first} {last}"
    forms = {"first": first, "last": last, "pron": "she" if female else "he", "Pron": "She" if female else "He"}
    forms["pos"] = "her" if female else "his"
    forms["Pos"] = forms["pos"].capitalize()
    forms["obj"] = "her" if female else "him"
    if rng.random() < 0.2:
        title = rng.choice(TITLES)
        full = f"{title} {full}"
        forms["last"] = f"{title} {last}"
    return Value(full, forms)


def _town(rng: random.Random, split: str) -> Value:
    if rng.random() < 0.35:
        return Value(rng.choice(split_items(CITIES, split)))
    stem = rng.choice(split_items(TOWN_STEMS, split)) if rng.random() < 0.6 else coined(rng, 1, 2)
    return Value(stem + rng.choice(TOWN_ENDS))


def _firm(rng: random.Random, split: str) -> Value:
    style = rng.random()
    if style < 0.4:
        name = rng.choice(split_items(SURNAMES, split)) if rng.random() < 0.5 else coined(rng, 2, 3)
        short = name
        full = f"{name} {rng.choice(FIRM_ENDS)}"
    elif style < 0.7:
        a, b = rng.sample(list(split_items(SURNAMES, split)), 2)
        full = f"{a} & {b}"
        short = a
    else:
        short = coined(rng, 2, 3)
        full = f"{short} {rng.choice(FIRM_ENDS)}"
    return Value(full, {"short": short})


def _org(rng: random.Random, split: str) -> Value:
    if rng.random() < 0.15:
        saint = rng.choice(split_items(FIRST_NAMES_F + FIRST_NAMES_M, split))
        return Value(f"St {saint}'s {rng.choice(('School', 'Church', 'Hospital', 'College', 'Primary'))}")
    place = _town(rng, split).text
    kinds = ORG_KINDS if rng.random() < 0.6 else INSTITUTION_KINDS
    full = f"the {place} {rng.choice(split_items(kinds, split))}"
    return Value(full, {"Cap": "T" + full[1:]})


def _rule(rng: random.Random, split: str) -> Value:
    condition, outcome = rng.choice(split_items(RULES, split))
    return Value(outcome, {"cond": condition})


def _people(rng: random.Random, split: str) -> Value:
    names = [_person(rng, split).text for _ in range(rng.randint(2, 3))]
    return Value(", ".join(names[:-1]) + " and " + names[-1])


def _measure_name(kind: str) -> Callable[[random.Random, str], Value]:
    names = [name for name, k in MEASURES if k == kind]
    return lambda rng, split: Value(rng.choice(names))


def _reference(rng: random.Random, split: str) -> Value:
    letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTWXZ") for _ in range(2))
    return Value(
        f"{letters}-{rng.randint(100, 9999)}" if rng.random() < 0.7 else f"{letters}{rng.randint(10000, 99999)}"
    )


def _compound(rng: random.Random, split: str) -> Value:
    """A figure and unit used as an adjective: "three-bedroom", "40-minute", "1,900-kilometre"."""
    noun = rng.choice(("bedroom", "year", "minute", "kilometre", "page", "day", "week", "metre", "storey", "mile"))
    n = rng.choice(COUNT_WORDS[:8]) if noun in ("bedroom", "storey", "year") and rng.random() < 0.7 else None
    number = n or _thousands(rng.randint(2, 2400 if noun in ("kilometre", "metre", "page", "mile") else 60))
    return Value(f"{number}-{noun}", {"number": number, "unit": noun + "s"})


def _thousands(n: int) -> str:
    return f"{n:,}"


def _count(rng: random.Random, split: str) -> Value:
    if rng.random() < 0.4:
        return Value(rng.choice(COUNT_WORDS))
    return Value(_thousands(rng.choice((rng.randint(2, 60), rng.randint(60, 999), rng.randint(1000, 90000)))))


def _small_count(rng: random.Random, split: str) -> Value:
    if rng.random() < 0.5:
        return Value(rng.choice(COUNT_WORDS[:8]))
    return Value(str(rng.randint(2, 14)))


def _year(rng: random.Random, split: str) -> Value:
    return Value(str(rng.randint(1640, 2024)))


def _date(rng: random.Random, split: str) -> Value:
    """A full date (day, month, year) in one of the common written orders."""
    day, month, year = rng.randint(1, 28), rng.choice(MONTHS), rng.randint(1890, 2025)
    style = rng.random()
    if style < 0.55:
        return Value(f"{day} {month} {year}")
    if style < 0.85:
        return Value(f"{month} {day}, {year}")
    return Value(f"{rng.choice(WEEKDAYS)} {day} {month}")


def _month_year(rng: random.Random, split: str) -> Value:
    return Value(f"{rng.choice(MONTHS)} {rng.randint(1890, 2025)}")


def _time(rng: random.Random, split: str) -> Value:
    hour, minute = rng.randint(0, 23), rng.choice((0, 5, 10, 15, 20, 25, 30, 40, 45, 50, 55))
    style = rng.random()
    if style < 0.5:
        return Value(f"{hour:02d}:{minute:02d}")
    h12 = hour % 12 or 12
    suffix = "am" if hour < 12 else "pm"
    if minute == 0:
        return Value(f"{h12} {suffix}" if style < 0.8 else f"{h12}{suffix}")
    return Value(f"{h12}.{minute:02d} {suffix}")


_CURRENCIES = (("£", ""), ("$", ""), ("€", ""), ("", " euros"), ("", " dollars"), ("", " pounds"))


def _money(rng: random.Random, split: str) -> Value:
    symbol, word = rng.choice(_CURRENCIES)
    style = rng.random()
    if style < 0.35:
        amount = str(rng.randint(2, 95)) if rng.random() < 0.6 else f"{rng.randint(1, 40)}.{rng.randint(0, 99):02d}"
    elif style < 0.7:
        amount = _thousands(rng.randint(100, 250000))
    else:
        scale = rng.choice(("million", "billion"))
        amount = f"{rng.randint(1, 950)}" if rng.random() < 0.5 else f"{rng.randint(1, 9)}.{rng.randint(1, 99)}"
        amount = f"{amount} {scale}"
    return Value(f"{symbol}{amount}{word}")


def _price(rng: random.Random, split: str) -> Value:
    symbol, word = rng.choice(_CURRENCIES)
    amount = str(rng.randint(2, 95)) if rng.random() < 0.6 else f"{rng.randint(1, 40)}.{rng.randint(0, 99):02d}"
    return Value(f"{symbol}{amount}{word}")


def _dose(rng: random.Random, split: str) -> Value:
    n = rng.choice((5, 10, 20, 25, 50, 100, 125, 200, 250, 400, 500))
    unit = rng.choice(("mg", "mg", "milligrams", "micrograms"))
    return Value(f"{n} {unit}", {"number": str(n), "unit": unit})


def _stars(rng: random.Random, split: str) -> Value:
    return Value(rng.choice(("one", "two", "three", "four", "five", "2", "3", "4")))


_UNITS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "length": (("mm", 2, 90), ("cm", 3, 240), ("metres", 2, 950), ("kilometres", 3, 4200), ("miles", 2, 900)),
    "size": (("mm", 2, 90), ("cm", 3, 240), ("metres", 1, 12), ("inches", 2, 60), ("m", 1, 9)),
    "distance": (("kilometres", 3, 4200), ("km", 2, 3000), ("miles", 2, 900)),
    "height": (("metres", 40, 8800), ("m", 20, 6000), ("feet", 100, 20000)),
    "weight": (("grams", 5, 900), ("g", 5, 750), ("kilograms", 2, 400), ("kg", 1, 90), ("tonnes", 2, 900)),
    "volume": (("litres", 1, 500), ("ml", 5, 900), ("cubic metres", 2, 9000)),
    "speed": (("km/h", 10, 320), ("mph", 5, 180), ("knots", 4, 60), ("metres per second", 2, 90)),
    "area": (("hectares", 3, 9000), ("square kilometres", 4, 90000), ("acres", 2, 5000), ("square metres", 8, 9000)),
    "power": (("watts", 20, 3000), ("W", 20, 2500), ("kilowatts", 2, 900)),
    "data": (("GB", 2, 512), ("MB", 10, 900), ("TB", 1, 20)),
}


# Conversions written after some measures, as encyclopaedias do: "412 square kilometres (159 sq mi)".
_CONVERSIONS: dict[str, tuple[float, str]] = {
    "square kilometres": (0.386, "sq mi"),
    "kilometres": (0.621, "mi"),
    "km": (0.621, "mi"),
    "miles": (1.609, "km"),
    "metres": (3.281, "ft"),
    "feet": (0.305, "m"),
    "kilograms": (2.205, "lb"),
    "kg": (2.205, "lb"),
    "tonnes": (1.102, "short tons"),
    "hectares": (2.471, "acres"),
    "litres": (0.264, "US gallons"),
    "km/h": (0.621, "mph"),
}


def _measure(kind: str) -> Callable[[random.Random, str], Value]:
    def make(rng: random.Random, split: str) -> Value:
        unit, low, high = rng.choice(_UNITS[kind])
        n = rng.randint(low, high)
        if kind == "area" and unit == "square kilometres" and rng.random() < 0.3:
            n *= 1000
        number = f"{n}.{rng.randint(1, 9)}" if n < 20 and rng.random() < 0.4 else _thousands(n)
        suffix = ""
        if unit in _CONVERSIONS and rng.random() < 0.3:
            factor, other = _CONVERSIONS[unit]
            suffix = f" ({_thousands(max(1, round(n * factor)))} {other})"
        return Value(f"{number} {unit}", {"number": number, "unit": unit}, suffix)

    return make


def _temperature_in(low: int, high: int) -> Callable[[random.Random, str], Value]:
    def make(rng: random.Random, split: str) -> Value:
        n = rng.randint(low, high)
        style = rng.random()
        text = f"{n} °C" if style < 0.4 else f"{n}°C" if style < 0.6 else f"{n} degrees" if style < 0.8 else f"{n}C"
        return Value(text)

    return make


_SHORT_UNITS = ("seconds", "minutes", "minutes", "hours")
_LONG_UNITS = ("days", "weeks", "months", "years")


def _duration_in(units: tuple[str, ...]) -> Callable[[random.Random, str], Value]:
    def make(rng: random.Random, split: str) -> Value:
        unit = rng.choice(units)
        n = rng.choice((rng.choice(COUNT_WORDS), str(rng.randint(2, 59 if unit in _SHORT_UNITS else 30))))
        if rng.random() < 0.12:
            return Value("an hour" if unit == "hours" else f"{rng.choice(('a', 'one'))} {unit[:-1]}")
        if rng.random() < 0.08:
            return Value(f"{n} and a half {unit}")
        return Value(f"{n} {unit}", {"number": n, "unit": unit})

    return make


def _percent(rng: random.Random, split: str) -> Value:
    n = rng.randint(2, 97)
    n_text = str(n) if rng.random() < 0.8 else f"{n}.{rng.randint(1, 9)}"
    return Value(f"{n_text}%" if rng.random() < 0.75 else f"{n_text} per cent")


def _frequency(rng: random.Random, split: str) -> Value:
    style = rng.random()
    if style < 0.5:
        unit = rng.choice(("minutes", "hours", "days", "weeks"))
        return Value(f"every {rng.randint(2, 45)} {unit}")
    if style < 0.8:
        times = rng.choice(("once", "twice", "three times", "four times"))
        return Value(f"{times} a {rng.choice(('day', 'week', 'month', 'year'))}")
    return Value(f"every {rng.choice(WEEKDAYS)}")


def _age(rng: random.Random, split: str) -> Value:
    return Value(str(rng.randint(17, 102)))


def _score(rng: random.Random, split: str) -> Value:
    winner = rng.randint(1, 7)
    return Value(f"{winner}-{rng.randint(0, winner - 1)}")


def _version(rng: random.Random, split: str) -> Value:
    return Value(f"{rng.randint(1, 12)}.{rng.randint(0, 20)}" + (f".{rng.randint(0, 9)}" if rng.random() < 0.6 else ""))


def _model_code(rng: random.Random, split: str) -> Value:
    letters = "".join(rng.choice("ABCDEFGHKLMPRSTVXZ") for _ in range(rng.randint(1, 3)))
    return Value(f"{letters}-{rng.randint(10, 990)}" if rng.random() < 0.6 else f"{letters}{rng.randint(2, 99)}")


def _route(rng: random.Random, split: str) -> Value:
    return Value(str(rng.randint(1, 99)) + (rng.choice(("", "", "A", "B", "X"))))


def _joined(items: Sequence[str], rng: random.Random) -> str:
    return ", ".join(items[:-1]) + rng.choice((" and ", " and ", " or ")) + items[-1]


def _food_list(rng: random.Random, split: str) -> Value:
    return Value(_joined(rng.sample(list(split_items(FOODS, split)), rng.randint(2, 4)), rng))


def _subject_list(rng: random.Random, split: str) -> Value:
    return Value(_joined(rng.sample(list(SUBJECTS), rng.randint(2, 3)), rng))


def _alias(rng: random.Random, split: str) -> Value:
    style = rng.random()
    if style < 0.5:
        return Value(
            f"the {rng.choice(('Old', 'Grey', 'Little', 'Iron', 'Green', 'Silent', 'Red'))} "
            f"{rng.choice(('Lady', 'Fox', 'Duke', 'Captain', 'Giant', 'Widow', 'Bishop', 'Queen'))}"
        )
    return Value(coined(rng, 2, 3))


def _title_words(rng: random.Random, split: str) -> Value:
    a, b = rng.sample(list(split_items(BOOK_WORDS, split)), 2)
    style = rng.random()
    text = f"The {a} and the {b}" if style < 0.3 else f"{a} of {b}" if style < 0.6 else f"The {a} {b}s"
    return Value(text)


def _region(rng: random.Random, split: str) -> Value:
    name = coined(rng, 2, 3)
    kind = rng.choice(("Valley", "Plateau", "Lowlands", "Hills", "Basin", "Peninsula", "Marshes", "Highlands", "Delta"))
    return Value(f"the {name} {kind}", {"short": name, "Cap": f"The {name} {kind}"})


def _lake(rng: random.Random, split: str) -> Value:
    return Value(f"Lake {coined(rng, 2, 3)}")


def _river(rng: random.Random, split: str) -> Value:
    name = coined(rng, 2, 3)
    return Value(f"the {name} River" if rng.random() < 0.6 else f"the River {name}", {"short": name})


def _island(rng: random.Random, split: str) -> Value:
    return Value(f"{coined(rng, 2, 3)} Island" if rng.random() < 0.5 else f"the island of {coined(rng, 2, 3)}")


def _species_name(rng: random.Random, split: str) -> Value:
    adj = rng.choice(("spotted", "common", "lesser", "greater", "crested", "marsh", "mountain", "grey", "red-necked"))
    return Value(f"{adj} {rng.choice(split_items(ANIMALS, split))}")


def _team(rng: random.Random, split: str) -> Value:
    town = _town(rng, split).text
    end = rng.choice(("United", "Rovers", "Athletic", "City", "Harriers", "Wanderers", "Town", "Lions", "Comets"))
    return Value(f"{town} {end}", {"short": town})


def _product(rng: random.Random, split: str) -> Value:
    kind = rng.choice(split_items(PRODUCT_KINDS, split))
    code = _model_code(rng, split).text
    return Value(f"the {code} {kind}", {"code": code, "kind": kind, "Cap": f"The {code} {kind}"})


def _address(rng: random.Random, split: str) -> Value:
    return Value(f"{rng.randint(1, 180)} {rng.choice(STREETS)}")


MAKERS: dict[str, Maker] = {
    "person": Maker(_person, entity=True),
    "firm": Maker(_firm, entity=True),
    "org": Maker(_org, entity=True),
    "team": Maker(_team, entity=True),
    "product": Maker(_product, entity=True),
    "region": Maker(_region, entity=True),
    "lake": Maker(_lake, entity=True),
    "river": Maker(_river, entity=True),
    "island": Maker(_island, entity=True),
    "species": Maker(_species_name, entity=True),
    "town": Maker(_town, entity=True),
    "country": Maker(_pick(COUNTRIES), entity=True),
    "book": Maker(_title_words, entity=True),
    "dish": Maker(_pick(DISHES), entity=True),
    "profession": Maker(_pick(PROFESSIONS)),
    "role": Maker(_pick(ROLES)),
    "subject": Maker(_pick(SUBJECTS)),
    "instrument": Maker(_pick(INSTRUMENTS)),
    "sport": Maker(_pick(SPORTS)),
    "colour": Maker(_pick(COLOURS)),
    "language": Maker(_pick(LANGUAGES)),
    "material": Maker(_pick(MATERIALS)),
    "animal": Maker(_pick(ANIMALS)),
    "plant": Maker(_pick(PLANTS)),
    "food": Maker(_pick(FOODS)),
    "foods": Maker(_food_list),
    "subjects": Maker(_subject_list),
    "childword": Maker(_pick(("daughter", "son"))),
    "service": Maker(_pick(SERVICES)),
    "award": Maker(_pick(AWARDS)),
    "symptom": Maker(_pick(SYMPTOMS)),
    "weather": Maker(_pick(WEATHER)),
    "vehicle": Maker(_pick(VEHICLES)),
    "pieces": Maker(_pick(GAME_PIECES)),
    "booktype": Maker(_pick(BOOK_KINDS)),
    "reason": Maker(_pick(REASONS)),
    "cause": Maker(_pick(CAUSES)),
    "feature": Maker(_pick(FEATURES)),
    "bug": Maker(_pick(BUGS)),
    "weekday": Maker(_pick(WEEKDAYS)),
    "month": Maker(_pick(MONTHS)),
    "season": Maker(_pick(SEASONS)),
    "ordinal": Maker(_pick(ORDINALS)),
    "fraction": Maker(_pick(FRACTIONS)),
    "alias": Maker(_alias),
    "count": Maker(_count),
    "few": Maker(_small_count),
    "year": Maker(_year),
    "date": Maker(_date),
    "monthyear": Maker(_month_year),
    "time": Maker(_time),
    "money": Maker(_money),
    "price": Maker(_price),
    "stars": Maker(_stars),
    "dose": Maker(_dose),
    "length": Maker(_measure("length")),
    "size": Maker(_measure("size")),
    "distance": Maker(_measure("distance")),
    "height": Maker(_measure("height")),
    "weight": Maker(_measure("weight")),
    "volume": Maker(_measure("volume")),
    "speed": Maker(_measure("speed")),
    "area": Maker(_measure("area")),
    "power": Maker(_measure("power")),
    "data": Maker(_measure("data")),
    "temperature": Maker(_temperature_in(-15, 42)),
    "oven": Maker(_temperature_in(140, 250)),
    "duration": Maker(_duration_in(_SHORT_UNITS + _LONG_UNITS)),
    "span": Maker(_duration_in(_SHORT_UNITS)),
    "period": Maker(_duration_in(_LONG_UNITS)),
    "percent": Maker(_percent),
    "frequency": Maker(_frequency),
    "age": Maker(_age),
    "score": Maker(_score),
    "version": Maker(_version),
    "code": Maker(_model_code),
    "route": Maker(_route),
    "address": Maker(_address),
    "surname": Maker(_pick(SURNAMES)),
    "rule": Maker(_rule),
    "reference": Maker(_reference),
    "compound": Maker(_compound),
    "people": Maker(_people),
    "purpose": Maker(_pick(PURPOSES)),
    "moneything": Maker(_measure_name("money")),
    "countthing": Maker(_measure_name("count")),
}


def make_value(kind: str, rng: random.Random, split: str) -> Value:
    try:
        maker = MAKERS[kind]
    except KeyError:
        raise ValueError(f"no value maker for slot kind {kind!r}") from None
    return maker.make(rng, split)


def is_entity(kind: str) -> bool:
    return MAKERS[kind].entity
