"""The agenda user's wording: slot phrases that carry values verbatim, question detectors, and variant choice."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cache

from josh.envs.toolwoz.phrases import SLOT_PHRASES

_INTENT = {
    "restaurant": (
        "I'm looking for a restaurant.",
        "Can you help me find a restaurant?",
        "I'd like to find a restaurant.",
    ),
    "hotel": ("I'm looking for a place to stay.", "I need somewhere to stay.", "Can you help me find a place to stay?"),
    "attraction": (
        "I'm looking for an attraction to visit.",
        "Can you suggest an attraction in town?",
        "I'd like to visit an attraction.",
    ),
    "train": ("I need a train.", "I'm looking for a train.", "Can you help me find a train?"),
}

_SEARCH_SLOTS = ("name", "food", "area", "pricerange", "departure", "destination", "day", "leaveAt", "arriveBy")
_SEARCH = {**{slot: SLOT_PHRASES[slot] for slot in _SEARCH_SLOTS}, "stars": "with a {v} star rating"}
_TYPE = {"hotel": "that is a {v}", "attraction": "of the {v} type"}
_YES_NO = {
    ("parking", True): "with free parking",
    ("parking", False): "without free parking",
    ("internet", True): "with free internet",
    ("internet", False): "without free internet",
}
_BOOK = {slot: SLOT_PHRASES[slot] for slot in ("people", "day", "time", "stay")}

_NOUN = {
    "name": "name",
    "food": "type of food",
    "area": "area",
    "pricerange": "price range",
    "type": "type",
    "stars": "star rating",
    "parking": "parking",
    "internet": "internet",
    "departure": "departure station",
    "destination": "destination",
    "day": "day",
    "leaveAt": "departure time",
    "arriveBy": "arrival time",
    "time": "time",
    "people": "number of people",
    "stay": "length of stay",
    "phone": "phone number",
    "postcode": "postcode",
    "address": "address",
    "price": "price",
    "duration": "duration",
    "trainID": "train ID",
    "entrance fee": "entrance fee",
    "openhours": "opening hours",
    "reference": "reference number",
}

_ASK = {
    "name": r"\bname\b|particular (place|one|restaurant|hotel|attraction)|specific (place|one)",
    "food": r"\bfood\b|cuisine",
    "area": r"\barea\b|part of (town|the city)",
    "pricerange": r"price|budget",
    "type": r"\btype\b|kind of|guest ?house|hotel or",
    "stars": r"\bstars?\b",
    "parking": r"parking",
    "internet": r"internet|wi-?fi",
    "departure": r"depart\w{0,9} from|leav\w{0,9} from|where from|from where|travel\w{0,9} from|departure (station|city)",
    "destination": r"destination|travel\w{0,9} to\b|going to\b|heading|where to\b",
    "day": r"\bday\b|\bdate\b|\bwhen\b",
    "leaveAt": r"leav\w{0,9} (at|after)\b|departure time|depart at",
    "arriveBy": r"arriv\w{0,9} by|arrival time|get there by",
    "time": r"what time|\btime\b",
    "people": r"people|how many (guests|persons|of you)|party|tickets|seats|guests",
    "stay": r"nights?\b|how long|\bstay\b",
}
# A question also asks about the slot when it says the first word and, later, the second ("what time do you
# want to leave?"); checked from the first occurrence on, so the cost stays linear in the text.
_ASK_AFTER = {"leaveAt": ("time", re.compile(r"\bleav")), "arriveBy": ("time", re.compile(r"\barriv"))}
_SENTENCE = re.compile(r"[^.!?]*[.!?]?")


def choose(options: Sequence[str], key: str) -> str:
    """One of ``options``, chosen by a stable hash of ``key`` (same key, same choice, on every machine)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return options[int.from_bytes(digest, "big") % len(options)]


def intent(domain: str, task_id: str, turn: int) -> str:
    """The sentence that opens a domain."""
    return choose(_INTENT.get(domain, (f"I need help with a {domain}.",)), f"{task_id}|{turn}|intent")


def _yes(value: str) -> bool:
    return value.strip().lower() in ("yes", "true", "free", "y")


def search_phrase(domain: str, slot: str, value: str) -> str:
    """A search constraint as a phrase that contains its value (yes/no slots are worded)."""
    if slot in ("parking", "internet"):
        return _YES_NO[(slot, _yes(value))]
    if slot == "type":
        return _TYPE.get(domain, "of the {v} type").format(v=value)
    return _SEARCH.get(slot, slot + " {v}").format(v=value)


def book_phrase(domain: str, slot: str, value: str) -> str:
    """A booking slot as a phrase that contains its value."""
    if domain == "hotel" and slot == "day":
        return f"starting on {value}"
    if slot == "people" and value.strip() == "1":
        return "for 1 person"
    return _BOOK.get(slot, slot + " {v}").format(v=value)


def slot_noun(slot: str) -> str:
    """How the user names a slot or attribute."""
    return _NOUN.get(slot, slot)


def join_phrases(parts: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def attribute_list(attrs: Sequence[str]) -> str:
    """Requested attributes as a list: ``phone number, postcode and address``."""
    return join_phrases([slot_noun(a) for a in attrs])


@cache
def ask_phrase(slot: str) -> re.Pattern[str]:
    """A pattern that finds a question about ``slot`` in lower-cased text without apostrophes."""
    return re.compile(_ASK.get(slot, rf"\b{re.escape(slot.lower())}\b"))


def sentences(text: str) -> list[str]:
    """``text`` cut after every ``.``, ``!`` and ``?`` (each piece keeps its mark), in one linear pass."""
    return [s for s in _SENTENCE.findall(text) if s]


def questions_of(text: str) -> list[str]:
    """The sentences of ``text`` that end with a question mark."""
    return [s for s in sentences(text) if s.endswith("?")]


def asks_about(slot: str, questions: str) -> bool:
    """Whether ``questions`` (question sentences, lower-cased, apostrophes dropped) asks about ``slot``."""
    if ask_phrase(slot).search(questions):
        return True
    first, then = _ASK_AFTER.get(slot, ("", None))
    start = questions.find(first) if then is not None else -1
    while start >= 0:
        end = questions.find("?", start)
        end = len(questions) if end < 0 else end
        if then.search(questions, start + len(first), end):
            return True
        start = questions.find(first, end)
    return False
