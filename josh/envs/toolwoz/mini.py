"""The mini ToolWOZ set: an invented town's database in the MultiWOZ schema, plus generated train/val/test tasks.

Everything here is made up (names, streets, phone numbers in the 01632 range that UK regulators keep for fiction,
stations), so the set can ship with the project. ``write_mini`` is deterministic: the same seed writes the same
bytes, which a test checks against the copy in ``envs/toolwoz_mini/``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from josh.envs.toolwoz.generator import DAYS, DB, GoalGenerator, check_task
from josh.envs.toolwoz.task import task_line
from josh.types import Task
from josh.util.atomic import write_atomic

SPLIT_SIZES = {"train": 200, "val": 30, "test": 50}
AREAS = ("centre", "north", "south", "east", "west")
HUB = "aldermere"
STATIONS = ("brackenford", "eastholm", "greywater", "lowmarsh airport")
STREETS = (
    "tanner lane", "quayside", "orchard row", "chapel walk", "fennel street", "millrace road", "saddlers yard",
    "hawthorn avenue", "lock street", "beacon hill", "cooper's close", "weaver road",
)  # fmt: skip
FOODS = ("british", "italian", "indian", "chinese", "french", "thai", "spanish", "lebanese", "japanese", "turkish")
_RESTAURANT_WORDS = (
    ("the copper", "the saffron", "the juniper", "the lantern", "the olive", "the willow", "the harbour",
     "the amber", "the thistle", "the quince", "the gilded", "the painted"),
    ("kitchen", "table", "bistro", "grill", "canteen", "pantry", "brasserie", "larder"),
)  # fmt: skip
_HOTEL_NAMES = (
    "alder house", "birchwood lodge", "the corn exchange hotel", "dovecote guest house", "elmfield inn",
    "fairholme guest house", "the granary hotel", "heron's rest", "ivy bank guest house", "the kingfisher hotel",
    "larkspur house", "the maltings hotel", "nightingale lodge", "the old mill hotel", "poppyfield guest house",
)  # fmt: skip
_ATTRACTIONS = (
    ("museum", ("aldermere museum of clocks", "the weavers museum", "harbour history museum", "the toy museum")),
    ("college", ("st osric's college", "merton fields college", "greyfriars college")),
    ("park", ("millrace park", "the botanic walk", "heron meadows")),
    ("theatre", ("the playhouse", "quayside theatre")),
    ("cinema", ("the picture palace", "starlight cinema")),
    ("nightclub", ("the cellar club", "neon rooms")),
    ("architecture", ("st anselm's church", "the old guildhall", "the round tower")),
    ("boat", ("aldermere river cruises", "the punting station")),
    ("swimmingpool", ("eastholm lido", "the lantern pool")),
)  # fmt: skip


def _phone(rng: random.Random) -> str:
    return f"01632{rng.randint(0, 999999):06d}"


def _postcode(rng: random.Random) -> str:
    return f"al{rng.randint(1, 9)}{rng.randint(1, 9)}{rng.choice('abdefghjlnpqrstuwxyz')}{rng.choice('abdefhjlnpqstu')}"


def _place(rng: random.Random, index: int) -> dict[str, Any]:
    """The fields every venue has: id, address, area, phone, postcode, location."""
    return {
        "address": f"{rng.randint(1, 120)} {rng.choice(STREETS)}",
        "area": AREAS[index % len(AREAS)] if index < len(AREAS) else rng.choice(AREAS),
        "id": str(index),
        "location": [round(51.7 + rng.random() / 10, 6), round(-2.4 + rng.random() / 10, 6)],
        "phone": _phone(rng),
        "postcode": _postcode(rng),
    }


def restaurants(rng: random.Random, n: int = 30) -> list[dict[str, Any]]:
    names = [f"{a} {b}" for a in _RESTAURANT_WORDS[0] for b in _RESTAURANT_WORDS[1]]
    rows = []
    for i, name in enumerate(sorted(rng.sample(names, n))):
        food = FOODS[i % len(FOODS)] if i < len(FOODS) else rng.choice(FOODS)
        row = {
            **_place(rng, i),
            "food": food,
            "name": name,
            "pricerange": rng.choice(("cheap", "moderate", "expensive")),
        }
        row["introduction"] = f"{name} serves {food} dishes in the {row['area']} of town"
        row["type"] = "restaurant"
        rows.append(dict(sorted(row.items())))
    return rows


def hotels(rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for i, name in enumerate(_HOTEL_NAMES):
        kind = "hotel" if "hotel" in name or "inn" in name else "guesthouse"
        pricerange = rng.choice(("cheap", "moderate", "expensive"))
        base = {"cheap": 40, "moderate": 65, "expensive": 100}[pricerange] + rng.randint(0, 15)
        price = {"double": str(base + 25), "family": str(base + 45), "single": str(base)}
        row = {
            **_place(rng, i),
            "internet": rng.choice(("yes", "yes", "no")),
            "name": name,
            "parking": rng.choice(("yes", "no")),
            "price": price,
            "pricerange": pricerange,
            "stars": rng.choice(("2", "3", "4")) if kind == "hotel" else rng.choice(("0", "3", "4")),
            "takesbookings": "yes",
            "type": kind,
        }
        rows.append(dict(sorted(row.items())))
    return rows


def attractions(rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    venues = [(kind, name) for kind, names in _ATTRACTIONS for name in names]
    for i, (kind, name) in enumerate(venues):
        fee = "free" if kind in ("park", "college", "architecture") else f"{rng.randint(2, 7)} pounds"
        row = {
            **_place(rng, i),
            "entrance fee": fee,
            "name": name,
            "openhours": rng.choice(("daily 9 a.m. to 5 p.m.", "tuesday to sunday 10 a.m. to 6 p.m.", "?")),
            "pricerange": "free" if fee == "free" else rng.choice(("cheap", "moderate")),
            "type": kind,
        }
        rows.append(dict(sorted(row.items())))
    return rows


def trains(rng: random.Random) -> list[dict[str, Any]]:
    """Three trains a day each way between the hub and every other station (168 rows)."""
    rows = []
    used: set[str] = set()
    for station in STATIONS:
        minutes = rng.randint(20, 75)
        fare = rng.randint(400, 2400) / 100
        first = rng.randint(5 * 60, 8 * 60)
        for departure, destination in ((HUB, station), (station, HUB)):
            offset = rng.randint(0, 50)
            for day in DAYS:
                weekend = day in ("saturday", "sunday")
                for slot in range(3):
                    leave = first + offset + slot * rng.randint(200, 280)
                    arrive = leave + minutes
                    train_id = f"TR{rng.randint(1000, 9999)}"
                    while train_id in used:
                        train_id = f"TR{rng.randint(1000, 9999)}"
                    used.add(train_id)
                    rows.append(
                        {
                            "arriveBy": f"{arrive // 60:02d}:{arrive % 60:02d}",
                            "day": day,
                            "departure": departure,
                            "destination": destination,
                            "duration": f"{minutes} minutes",
                            "leaveAt": f"{leave // 60:02d}:{leave % 60:02d}",
                            "price": f"{fare * (0.8 if weekend else 1.0):.2f} pounds",
                            "trainID": train_id,
                        }
                    )
    return rows


def make_db(seed: int = 0) -> DB:
    """The invented town's database, one list of rows per domain."""
    rng = random.Random(seed)
    return {"restaurant": restaurants(rng), "hotel": hotels(rng), "attraction": attractions(rng), "train": trains(rng)}


def make_tasks(db: DB, seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, list[Task]]:
    """Generated tasks per split; every one is checked to be solvable on ``db``."""
    generator = GoalGenerator(db, seed=seed)
    out = {
        split: generator.tasks(n, prefix=f"mini_{split}", split=split) for split, n in (sizes or SPLIT_SIZES).items()
    }
    problems = [p for tasks in out.values() for t in tasks for p in check_task(t, db)]
    if problems:
        raise RuntimeError("generated an unsolvable task: " + "; ".join(problems[:5]))
    return out


def _rows_json(rows: list[dict[str, Any]]) -> str:
    """One row per line: small, stable and easy to diff."""
    return "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n"


def write_mini(dest: str | Path, *, seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """Write ``db/*_db.json`` and ``tasks_{split}.jsonl`` under ``dest``; returns the task count per split."""
    dest = Path(dest)
    (dest / "db").mkdir(parents=True, exist_ok=True)
    db = make_db(seed)
    for domain, rows in db.items():
        write_atomic(dest / "db" / f"{domain}_db.json", _rows_json(rows))
    counts = {}
    for split, tasks in make_tasks(db, seed, sizes).items():
        lines = "".join(task_line(t) for t in tasks)
        write_atomic(dest / f"tasks_{split}.jsonl", lines)
        counts[split] = len(tasks)
    return counts
