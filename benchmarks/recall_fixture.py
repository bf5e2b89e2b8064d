"""The recall benchmark's fixture: a long conversation of filler chat with planted facts,
and for each fact a question that shares no content word with it (a paraphrase).

Each fact names a thing by one word and the question names it by a synonym, in frames
whose other words differ too ("Note for later: the sofa is stored in the attic." /
"Where did we put the couch?"). `check_no_shared_words()` proves the no-shared-word rule
(exact words and 5-letter prefixes, stop words aside). The filler mentions the same
things in passing (both the fact word and the question word), so neither a keyword nor a
topic match is enough by itself. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from memory.fulltext import query_terms

# (word in the fact, word in the question)
SYNONYMS = [
    ("automobile", "car"),
    ("physician", "doctor"),
    ("attorney", "lawyer"),
    ("sofa", "couch"),
    ("kitten", "cat"),
    ("puppy", "dog"),
    ("bicycle", "bike"),
    ("telephone", "phone"),
    ("spectacles", "eyeglasses"),
    ("refrigerator", "fridge"),
    ("television", "tv"),
    ("motorcycle", "chopper"),
    ("jacket", "coat"),
    ("trousers", "pants"),
    ("sneakers", "trainers"),
    ("luggage", "suitcase"),
    ("wallet", "billfold"),
    ("pharmacy", "drugstore"),
    ("apartment", "flat"),
    ("garbage", "trash"),
    ("faucet", "tap"),
    ("cookies", "biscuits"),
    ("candy", "sweets"),
    ("elevator", "lift"),
    ("highway", "motorway"),
    ("vacation", "holiday"),
    ("movie", "film"),
    ("parcel", "package"),
    ("pupil", "student"),
    ("instructor", "teacher"),
    ("infant", "baby"),
    ("spouse", "wife"),
    ("physician's", "doctor's"),
    ("notebook", "journal"),
    ("couch cushion", "sofa pillow"),
    ("stove", "cooker"),
    ("lorry", "truck"),
    ("grandmother", "granny"),
    ("grandfather", "gramps"),
    ("father", "dad"),
    ("mother", "mom"),
    ("brother", "sibling"),
    ("rabbit", "bunny"),
    ("horse", "pony"),
    ("boat", "ship"),
    ("airplane", "aircraft"),
    ("cellar", "basement"),
    ("attic", "loft"),
    ("garden", "yard"),
    ("street", "road"),
    ("shop", "boutique"),
    ("doctor's office", "clinic"),
    ("medicine", "pills"),
    ("necklace", "pendant"),
    ("ring", "band"),
    ("wristwatch", "timepiece"),
    ("umbrella", "parasol"),
    ("blanket", "quilt"),
    ("pillow", "cushion"),
    ("carpet", "rug"),
    ("curtains", "drapes"),
    ("lamp", "light"),
    ("closet", "wardrobe"),
    ("cupboard", "cabinet"),
    ("kettle", "teapot"),
    ("mug", "cup"),
    ("saucepan", "pot"),
    ("scissors", "shears"),
    ("hammer", "mallet"),
    ("ladder", "stepladder"),
    ("shovel", "spade"),
    ("lawnmower", "mower"),
    ("barbecue", "grill"),
    ("guitar", "instrument"),
    ("piano", "keyboard"),
    ("violin", "fiddle"),
    ("novel", "book"),
    ("magazine", "periodical"),
    ("newspaper", "paper"),
    ("photograph", "picture"),
    ("painting", "artwork"),
    ("sculpture", "statue"),
    ("passport", "travel document"),
    ("ticket", "pass"),
    ("invoice", "bill"),
    ("receipt", "proof of purchase"),
    ("contract", "agreement"),
    ("password", "passcode"),
    ("laptop", "computer"),
    ("printer", "copier"),
    ("router", "modem"),
    ("headphones", "earbuds"),
    ("camera", "camcorder"),
    ("charger", "power adapter"),
    ("battery", "power cell"),
    ("backpack", "rucksack"),
    ("handbag", "tote"),
    ("suitcase key", "luggage lock"),
    ("dentist", "orthodontist"),
    ("veterinarian", "vet"),
    ("plumber", "pipefitter"),
    ("electrician", "wiring specialist"),
    ("mechanic", "car repairman"),
    ("accountant", "bookkeeper"),
    ("neighbor", "person next door"),
    ("landlord", "property owner"),
    ("boss", "manager"),
    ("colleague", "coworker"),
]

NAMES = [
    "Bertha",
    "Quincy",
    "Marlowe",
    "Tansy",
    "Ozzie",
    "Pippin",
    "Juniper",
    "Rocco",
    "Wendeline",
    "Barnaby",
    "Clementine",
    "Fitzgerald",
    "Gwendolyn",
    "Horatio",
    "Isadora",
    "Jasper",
    "Kerensa",
    "Leopold",
    "Mirabel",
    "Nestor",
]
PLACES = [
    "in the green crate beside the boiler",
    "behind the third shelf of the pantry",
    "inside the blue tin under the stairs",
    "at Aunt Rosa's cottage in Harwick",
    "in locker 47 at the Dunmore gym",
    "on top of the tall oak dresser",
    "at the storage unit on Fenwick Lane",
    "in the drawer below the microwave",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# (fact frame, question frame): {a} is the fact word, {b} the question word.
FRAMES = [
    ("Note for later: the {a} is stored {place}.", "Where did we put the {b}?"),
    ("Reminder that my {a} got nicknamed {name} last year.", "What do I call my {b}?"),
    ("I paid {price} euros for the {a} at the market.", "How much did the {b} cost me?"),
    ("The {a} broke down on {day} morning.", "When did the {b} stop working?"),
]

_FILLER_TOPICS = [
    "Can you help me refactor the payment module so the retry logic is clearer?",
    "The CI pipeline is slow again; the integration suite takes twenty minutes.",
    "Let's review the pull request about the caching layer before lunch.",
    "The weather forecast says rain all week, so the hike is postponed.",
    "I read an interesting article about compilers and register allocation.",
    "Our sprint planning moved to Thursday afternoon because of the offsite.",
    "The dashboard shows a spike in latency around midnight every day.",
    "Please summarise the meeting notes and send them to the team.",
    "The new intern is learning Rust and asked about lifetimes.",
    "We should benchmark the JSON parser with larger documents.",
    "I made pasta with tomatoes and basil for dinner yesterday.",
    "The quarterly report needs two more charts about customer churn.",
]
_FILLER_MENTIONS = [
    "By the way, I saw a {w} advertised in a shop window today.",
    "My friend keeps talking about buying a new {w}.",
    "There was an article about the history of the {w}.",
    "Someone in the office mentioned a {w} during the standup.",
]


@dataclass(frozen=True)
class PlantedFact:
    index: int
    fact: str
    question: str
    seq: int = 0  # filled in when the conversation is written


def planted_facts(count: int = 200) -> list[PlantedFact]:
    facts = []
    for i in range(count):
        a, b = SYNONYMS[i % len(SYNONYMS)]
        fact_frame, question_frame = FRAMES[(i // len(SYNONYMS)) % len(FRAMES)]
        slots = {
            "a": a,
            "b": b,
            "place": PLACES[i % len(PLACES)],
            "name": NAMES[i % len(NAMES)],
            "price": str(40 + (i * 37) % 900),
            "day": DAYS[i % len(DAYS)],
        }
        facts.append(PlantedFact(i, fact_frame.format(**slots), question_frame.format(**slots)))
    return facts


def _stem_set(text: str) -> set[str]:
    return {term[:5] for term in query_terms(text)} | set(query_terms(text))


def check_no_shared_words(facts: list[PlantedFact]) -> list[PlantedFact]:
    """The facts whose question shares a content word (or a 5-letter prefix) with them."""
    return [f for f in facts if _stem_set(f.fact) & _stem_set(f.question)]


def messages(
    total: int = 5000, facts: int = 200, seed: int = 7, mention_rate: float = 0.05
) -> tuple[list[tuple[str, str]], list[PlantedFact]]:
    """(role, text) in order, and the planted facts with their message seq (1-based)."""
    rng = random.Random(seed)
    planted = planted_facts(facts)
    slots = sorted(rng.sample(range(10, total - 10), len(planted)))
    by_slot = dict(zip(slots, planted, strict=True))
    out: list[tuple[str, str]] = []
    placed: list[PlantedFact] = []
    words = [w for pair in SYNONYMS for w in pair]
    for position in range(total):
        role = "user" if position % 2 == 0 else "assistant"
        fact = by_slot.get(position)
        if fact is not None:
            out.append(("user", fact.fact))
            placed.append(PlantedFact(fact.index, fact.fact, fact.question, seq=position + 1))
            continue
        text = rng.choice(_FILLER_TOPICS)
        if rng.random() < mention_rate:
            text += " " + rng.choice(_FILLER_MENTIONS).format(w=rng.choice(words))
        if role == "assistant":
            text = "Sure. " + text + f" (ref {position})"
        out.append((role, text))
    return out, placed


def words_of(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


# ---------------------------------------------------------------------------------------
# Facts said in passing (issue 47): the shape that showed the int8 regression. Each fact is
# one sentence appended to an ordinary message of realistic length (3-6 sentences of
# everyday chat, 40-110 words), in a conversation of 5,000 such messages; the question
# shares no content word with the fact nor with the rest of its message. The facts use the
# same synonym pairs and frames as above.

_PASSING_SENTENCES = [
    "I spent most of the morning on the payment module and the retry logic is finally clearer.",
    "The integration suite took twenty minutes again, so I split it into three shards.",
    "We reviewed the caching layer pull request before lunch and left a few comments.",
    "The forecast says rain all week, so the hike with Sam is postponed until further notice.",
    "I read an article about compilers and register allocation that was surprisingly readable.",
    "Sprint planning moved to Thursday afternoon because of the offsite in Leeds.",
    "The dashboard shows a latency spike around midnight and nobody knows why yet.",
    "Could you summarise the meeting notes and send them to the team tonight?",
    "The new intern is learning Rust and asked a lot of questions about lifetimes.",
    "We should benchmark the JSON parser with much larger documents next week.",
    "I made pasta with tomatoes and basil for dinner and it turned out great.",
    "The quarterly report needs two more charts about customer churn by region.",
    "My sister called to say the kids loved the museum trip on Saturday.",
    "The gym was packed this evening so I only managed a short run.",
    "Our landlady finally fixed the heating, which took nearly three weeks.",
    "I started reading a mystery series set in Edinburgh and cannot stop.",
    "The train was delayed by forty minutes because of signal problems near Reading.",
    "We tried the new ramen place downtown and the broth was excellent.",
    "I have been meaning to learn the chords for that old Beatles song.",
    "The conference talk on distributed tracing was the best one of the day.",
    "Work has been hectic, with three releases scheduled in the same fortnight.",
    "I finally cleaned out my email inbox, which felt oddly satisfying.",
    "The plants on the balcony survived the heatwave, somehow.",
    "Maria is organising a board game night next Friday and everyone is invited.",
    "The database migration ran overnight without a single error.",
    "I signed up for a pottery class that starts in the spring.",
    "The coffee machine at the office is broken again, so everyone is grumpy.",
    "We argued for an hour about tabs versus spaces and nobody changed their mind.",
    "I watched the football match with friends and our team lost on penalties.",
    "The backlog grooming session went well and we closed twenty stale tickets.",
    "My neighbour's dog barked all night, so I am running on very little sleep.",
    "I think we should rewrite the onboarding guide before the new hires arrive.",
    "The flight to Lisbon was smooth and the hotel upgraded us for free.",
    "We need to renew the TLS certificates before the end of the month.",
    "I baked bread for the first time and it came out a little dense.",
    "The team lunch on Wednesday is at the Greek restaurant near the station.",
    "Honestly the weekend went by far too quickly.",
    "The load balancer config had a typo that took hours to find.",
    "I am thinking about taking a week off in October to visit my parents.",
    "The design review raised good points about accessibility and contrast.",
    "Our cat knocked a glass off the table this morning, as usual.",
    "The staging server ran out of disk space during the nightly build.",
    "I joined a running club that meets on Tuesday and Thursday evenings.",
    "The documentation for that library is thin, so I read the source instead.",
    "We had a long chat about career goals during my one-on-one today.",
    "The farmer's market had the first strawberries of the season.",
    "I keep forgetting to water the herbs on the kitchen windowsill.",
    "The security audit found two minor issues and nothing serious.",
]


@dataclass(frozen=True)
class PassingFact:
    """A fact said in passing: `message` is the whole message it was appended to."""

    index: int
    fact: str
    question: str
    message: str
    seq: int  # 1-based position in the conversation


@lru_cache(maxsize=1)
def _passing_terms() -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((s, frozenset(_stem_set(s))) for s in _PASSING_SENTENCES)


def _ordinary_message(rng: random.Random, avoid: set[str]) -> str:
    """3-6 everyday sentences (40-110 words) sharing no term with `avoid`."""
    pool = [s for s, words in _passing_terms() if not (words & avoid)]
    return " ".join(rng.sample(pool, rng.randint(3, 6)))


def passing_messages(
    total: int = 5000, facts: int = 30, seed: int = 47, mention_rate: float = 0.05
) -> tuple[list[tuple[str, str]], list[PassingFact]]:
    """(role, text) in order, and the facts said in passing with their message (issue 47's
    shape): each fact is the last sentence of an ordinary message, and its question shares
    no content word (nor a 5-letter prefix) with that whole message. Distractors as in
    `messages`: 5% of the other messages mention one of the fact or question words."""
    rng = random.Random(seed)
    chosen = rng.sample(planted_facts(len(SYNONYMS) * len(FRAMES)), facts)
    slots = sorted(rng.sample(range(10, total - 10), facts))
    by_slot = dict(zip(slots, chosen, strict=True))
    words = [w for pair in SYNONYMS for w in pair]
    out: list[tuple[str, str]] = []
    placed: list[PassingFact] = []
    for position in range(total):
        fact = by_slot.get(position)
        if fact is not None:
            text = _ordinary_message(rng, _stem_set(fact.question)) + " " + fact.fact
            out.append(("user", text))
            placed.append(PassingFact(fact.index, fact.fact, fact.question, text, position + 1))
            continue
        text = _ordinary_message(rng, set())
        if rng.random() < mention_rate:
            text += " " + rng.choice(_FILLER_MENTIONS).format(w=rng.choice(words))
        out.append(("user" if position % 2 == 0 else "assistant", text))
    return out, placed
