"""Natural-language goal descriptions for generated ToolWOZ tasks, in the style of MultiWOZ goal messages.

Every phrase has several wordings; the caller's seeded ``random.Random`` picks one, so the same seed gives the
same text. Values go in verbatim (lower-case, as the database has them).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from josh.envs.toolwoz.task import DomainGoal

_OPENING = {
    "restaurant": (
        "You are looking for a place to eat.",
        "You want to have a meal out and need a restaurant.",
        "You are hungry and would like a restaurant recommendation.",
    ),
    "hotel": (
        "You are looking for a place to stay.",
        "You need somewhere to sleep during your trip.",
        "You want to find accommodation.",
    ),
    "attraction": (
        "You would like to see something while you are in town.",
        "You are looking for an attraction to visit.",
        "You want a suggestion for somewhere to go.",
    ),
    "train": (
        "You need to take a train.",
        "You are planning a journey by train.",
        "You have to catch a train.",
    ),
}
_FOLLOW_UP = {
    "restaurant": ("You also want somewhere to eat.", "On top of that, you need a restaurant."),
    "hotel": ("You also need a place to stay.", "Besides that, you are looking for accommodation."),
    "attraction": ("You also want to visit an attraction.", "You would also like a place to visit."),
    "train": ("You also need a train.", "Besides that, you have to book travel by train."),
}
_NOUN = {"restaurant": "restaurant", "hotel": "place to stay", "attraction": "attraction", "train": "train"}

_CONSTRAINT = {
    "food": ("It should serve {v} food.", "You are in the mood for {v} food."),
    "pricerange": ("It should be in the {v} price range.", "You would like something {v}."),
    "area": ("It should be in the {v}.", "You would prefer the {v} of town."),
    "name": ("You already have one in mind: {v}.", "You are looking for a particular one called {v}."),
    "stars": ("It should have a star rating of {v}.", "It needs to be rated {v} stars."),
    "type": ("It should be a {v}.", "You would rather stay in a {v}."),
    "attraction type": ("It should be of the {v} type.", "You are interested in something in the {v} category."),
    "departure": ("The train should depart from {v}.", "You will be leaving from {v}."),
    "destination": ("The train should go to {v}.", "You are travelling to {v}."),
    "day": ("You will travel on {v}.", "The journey is on {v}."),
    "leaveAt": ("The train should leave after {v}.", "You want to leave at {v} or later."),
    "arriveBy": ("The train should arrive by {v}.", "You have to be there by {v}."),
}
_YES_NO = {
    "parking": (
        ("It should include free parking.", "You need free parking."),
        ("It does not need to have free parking.", "Parking does not matter to you."),
    ),
    "internet": (
        ("It should offer free wifi.", "Free internet is a must."),
        ("It does not need to have free internet.", "Wifi is not important to you."),
    ),
}
_BOOK = {
    "restaurant": (
        "Book a table for {people} at {time} on {day}.",
        "Once you find one, reserve it for {people} on {day} at {time}.",
    ),
    "hotel": (
        "Book it for {people} for {stay} starting {day}.",
        "Make a reservation for {people} and {stay} from {day}.",
    ),
    "train": ("Book tickets for {people}.", "Once you find a train, reserve seats for {people}."),
}
_REFERENCE = ("Make sure you get the reference number.", "Ask for the booking reference.")
_FAIL_INFO = ("If there is no such {noun}, try {v} instead.", "If nothing matches, you would settle for {v}.")
_FAIL_BOOK = ("If the booking fails, try {v} instead.", "If that is not possible, ask for {v} instead.")
_REQT_NAMES = {
    "phone": "phone number",
    "entrance fee": "entrance fee",
    "duration": "travel time",
    "trainID": "train ID",
    "arriveBy": "arrival time",
    "leaveAt": "departure time",
    "pricerange": "price range",
    "stars": "star rating",
    "internet": "whether they have internet",
    "parking": "whether they have parking",
}
_REQT = ("Ask for the {items}.", "Find out the {items}.", "You need to know the {items}.")


def _listing(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def constraint_sentence(domain: str, key: str, value: str, rng: random.Random) -> str:
    """One sentence stating a search constraint."""
    if domain == "attraction" and key == "type":
        key = "attraction type"
    if key in _YES_NO:
        return rng.choice(_YES_NO[key][0 if value == "yes" else 1])
    template = rng.choice(_CONSTRAINT.get(key, ("The {k} should be {v}.",)))
    return template.format(v=value, k=key)


def _slot_phrase(key: str, value: str) -> str:
    """A booking slot as words: ``people`` 1 -> "1 person", ``stay`` 3 -> "3 nights", other slots unchanged."""
    if key == "people":
        return f"{value} person" if value == "1" else f"{value} people"
    if key == "stay":
        return f"{value} night" if value == "1" else f"{value} nights"
    return value


def domain_text(domain: str, spec: DomainGoal, rng: random.Random, *, first: bool) -> list[str]:
    """The sentences describing one domain's goal: opening, constraints (the failing ones first), booking, asks."""
    sentences = [rng.choice((_OPENING if first else _FOLLOW_UP)[domain])]
    changed = {k: v for k, v in spec.fail_info.items() if spec.info.get(k) != v}
    for key, value in spec.info.items():
        sentences.append(constraint_sentence(domain, key, changed.get(key, value), rng))
    if changed:
        fallback = _listing([spec.info[k] for k in changed if k in spec.info])
        sentences.append(rng.choice(_FAIL_INFO).format(noun=_NOUN[domain], v=fallback))
    if spec.book:
        slots = {k: _slot_phrase(k, v) for k, v in {**spec.book, **spec.fail_book}.items()}
        sentences.append(rng.choice(_BOOK[domain]).format_map(defaultdict(str, slots)))
        if spec.fail_book:
            fallback = _listing([_slot_phrase(k, spec.book[k]) for k in spec.fail_book if k in spec.book])
            sentences.append(rng.choice(_FAIL_BOOK).format(v=fallback))
        sentences.append(rng.choice(_REFERENCE))
    if spec.reqt:
        items = [_REQT_NAMES.get(a, a) for a in spec.reqt]
        sentences.append(rng.choice(_REQT).format(items=_listing(items)))
    return sentences


def render_goal(goal: Mapping[str, DomainGoal], rng: random.Random) -> str:
    """The whole user goal as one paragraph, domains in the given order."""
    sentences: list[str] = []
    for i, (domain, spec) in enumerate(goal.items()):
        sentences.extend(domain_text(domain, spec, rng, first=i == 0))
    return " ".join(sentences)
