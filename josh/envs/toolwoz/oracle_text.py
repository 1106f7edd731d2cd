"""The oracle agent's wording: questions for missing details, result summaries and attribute answers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from josh.envs.toolwoz.phrases import SLOT_PHRASES

DOMAIN_WORDS = {
    "restaurant": r"restaurant|place to eat|somewhere to eat|\bfood\b|\bdine\b|dinner|lunch",
    "hotel": r"hotel|guest ?house|place to stay|somewhere to stay|accommodation|lodging",
    "attraction": r"attraction|sightseeing|things to do|something to (see|do)|museum",
    "train": r"\btrains?\b|railway",
}

_QUESTION = {
    "name": "do you have a particular name in mind",
    "food": "what type of food would you like",
    "area": "which area would you like",
    "pricerange": "what price range are you looking for",
    "stars": "how many stars should it have",
    "parking": "do you need parking",
    "internet": "do you need internet",
    "departure": "where will you be departing from",
    "destination": "where are you travelling to",
    "day": "which day",
    "leaveAt": "what time would you like to leave",
    "arriveBy": "what time do you need to arrive by",
    "people": "how many people",
    "time": "what time",
    "stay": "how many nights",
}
_TYPE_QUESTION = {"hotel": "would you prefer a hotel or a guesthouse", "attraction": "what type of attraction"}

ATTRIBUTES = {
    "phone": (r"phone", "phone number"),
    "postcode": (r"post ?code", "postcode"),
    "address": (r"address", "address"),
    "pricerange": (r"price range|pricerange", "price range"),
    "price": (r"\bprices?\b(?! range)|\bcost|how much|\bfare", "price"),
    "area": (r"\barea\b", "area"),
    "food": (r"\bfood\b|cuisine", "food"),
    "type": (r"\btype\b", "type"),
    "stars": (r"\bstars?\b", "star rating"),
    "internet": (r"internet|wi-?fi", "internet"),
    "parking": (r"parking", "parking"),
    "duration": (r"duration|travel time|how long", "duration"),
    "arriveBy": (r"arriv", "arrival time"),
    "leaveAt": (r"departure time|\bleav|depart at", "departure time"),
    "trainID": (r"train id|train number|\bid\b", "train ID"),
    "entrance fee": (r"entrance|admission|\bfee\b", "entrance fee"),
    "openhours": (r"opening hours|\bopen\b", "opening hours"),
}

BOOK_OFFER = {"restaurant": "a table", "hotel": "a room", "train": "tickets"}
RETRY = {
    "restaurant": "Would you like to try another day or time?",
    "hotel": "Would you like to try another day or length of stay?",
    "train": "Would you like to try a different number of tickets?",
}


def join(parts: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ask(domain: str, slot: str) -> str:
    """The oracle's question clause for one missing detail (also how it recognises that it already asked)."""
    if slot == "type":
        return _TYPE_QUESTION.get(domain, "what type")
    return _QUESTION.get(slot, f"what {slot}")


def questions(domain: str, slots: Sequence[str]) -> str:
    text = join([ask(domain, s) for s in slots])
    return text[0].upper() + text[1:] + "?"


def _describe(key: str, value: Any) -> str:
    if key in ("parking", "internet"):
        return ("without " if str(value).lower() == "no" else "with ") + key
    if key == "people" and str(value).strip() == "1":
        return "for 1 person"
    return SLOT_PHRASES.get(key, key + " {v}").format(v=value)


def describe(args: Mapping[str, Any]) -> str:
    """Search or booking arguments as words: ``serving italian food in the centre``."""
    return join([_describe(k, v) for k, v in args.items()])


def summary(domain: str, row: Mapping[str, Any]) -> str:
    """One sentence presenting a found row; always names the entity (name or train ID)."""
    if domain == "train":
        text = f"Train {row.get('trainID', '?')} leaves {row.get('departure', '?')} at {row.get('leaveAt', '?')}"
        return (
            text
            + f" on {row.get('day', '?')} and arrives in {row.get('destination', '?')} at {row.get('arriveBy', '?')}."
        )
    kind = "restaurant" if domain == "restaurant" else str(row.get("type") or domain)
    extra = [row.get("pricerange"), row.get("food") if domain == "restaurant" else None]
    words = [str(w) for w in extra if w and w != "?"] + [kind]
    article = "an" if words[0][0] in "aeiou" else "a"
    text = f"I found {row.get('name', 'a match')}, {article} {' '.join(words)}"
    if row.get("area"):
        text += f" in the {row['area']}"
    if domain == "hotel" and row.get("stars"):
        text += f" with {row['stars']} stars"
    return text + "."


def requested(text: str) -> list[str]:
    """Attributes a user utterance asks about (only its question sentences count)."""
    asked = " ".join(re.findall(r"[^.!?]*\?", text.lower()))
    return [attr for attr, (pattern, _) in ATTRIBUTES.items() if asked and re.search(pattern, asked)]


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def answers(row: Mapping[str, Any], attrs: Sequence[str]) -> str:
    """``The phone number is ... and the postcode is ....`` for the attributes the row has."""
    known = [f"the {ATTRIBUTES[a][1]} is {_value(row[a])}" for a in attrs if a in row and row[a] not in ("", "?")]
    if not known:
        return ""
    text = join(known)
    return text[0].upper() + text[1:] + "."
