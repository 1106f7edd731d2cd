"""A seeded generator of valid ToolWOZ tasks over any MultiWOZ-format database folder.

Each domain goal starts from a target row of the database, so the goal entity always exists and satisfies the
search constraints (``info``). Booking goals book that row with a fresh reference number; ``fail_info`` is a
constraint combination that matches no row (tried first), ``fail_book`` a booking slot the user tries first.
Train goals take their time constraint from a real train and book the train a traveller would pick; they get no
``fail_info`` / ``fail_book`` (MultiWOZ train goals rarely have them).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from josh.envs.toolwoz.goal_text import render_goal
from josh.envs.toolwoz.task import DOMAINS, ENTITY_KEY, DomainGoal, details_of, make_task
from josh.types import Task

Row = dict[str, Any]
DB = dict[str, list[Row]]

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
SEARCH_ATTRIBUTES = {
    "restaurant": ("food", "pricerange", "area"),
    "hotel": ("area", "pricerange", "stars", "type", "parking", "internet"),
    "attraction": ("type", "area"),
}
REQUESTABLE = {
    "restaurant": ("address", "phone", "postcode", "food", "pricerange", "area"),
    "hotel": ("address", "phone", "postcode", "pricerange", "stars", "area", "internet", "parking"),
    "attraction": ("address", "phone", "postcode", "entrance fee", "area", "type"),
    "train": ("price", "duration", "trainID", "arriveBy", "leaveAt"),
}
_EMPTY = ("", "?", "none")
_REFERENCE_ALPHABET = string.ascii_uppercase + string.digits


class GeneratorConfig(BaseModel):
    """How tasks are drawn; the defaults roughly follow MultiWOZ's mix."""

    single_domain: float = Field(0.7, ge=0.0, le=1.0, description="share of single-domain tasks")
    three_domains: float = Field(0.2, ge=0.0, le=1.0, description="share of 3-domain tasks among multi-domain ones")
    by_name: float = Field(0.2, ge=0.0, le=1.0, description="share of non-train goals that name the entity")
    book: float = Field(0.6, ge=0.0, le=1.0, description="share of bookable goals that book")
    fail_info: float = Field(0.15, ge=0.0, le=1.0)
    fail_book: float = Field(0.15, ge=0.0, le=1.0)
    max_reqt: int = Field(3, ge=0)


def load_db(db_dir: str | Path) -> DB:
    """Rows per ToolWOZ domain from ``{domain}_db.json`` files; domains without a file are left out."""
    folder = Path(db_dir)
    db: DB = {}
    for domain in DOMAINS:
        path = folder / f"{domain}_db.json"
        if not path.is_file():
            continue
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the database ({exc})") from exc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{path}: expected a JSON list of row objects")
        db[domain] = rows
    if not db:
        raise ValueError(f"{folder}: no restaurant/hotel/attraction/train _db.json files found")
    return db


def _norm(value: Any) -> str:
    return " ".join(str(value).lower().replace("'", "").split())


def satisfies(row: Row, constraints: Mapping[str, str]) -> bool:
    """Whether a row meets every constraint (train times: leave at or after, arrive at or before)."""
    for key, value in constraints.items():
        have = row.get(key)
        if have is None:
            return False
        if key == "leaveAt":
            if str(have) < value:
                return False
        elif key == "arriveBy":
            if str(have) > value:
                return False
        elif _norm(have) != _norm(value):
            return False
    return True


def matches(rows: list[Row], constraints: Mapping[str, str]) -> list[Row]:
    return [r for r in rows if satisfies(r, constraints)]


def _reference(rng: random.Random) -> str:
    return "".join(rng.choice(_REFERENCE_ALPHABET) for _ in range(8))


def _round_time(hhmm: str, *, up: bool) -> str:
    hours, minutes = (int(p) for p in hhmm.split(":"))
    total = hours * 60 + minutes
    total = (total + 14) // 15 * 15 if up else total // 15 * 15
    return f"{total // 60:02d}:{total % 60:02d}"


class GoalGenerator:
    """Draws tasks from a database with a seeded ``random.Random``; the same seed and DB give the same tasks."""

    def __init__(self, db: DB, *, seed: int = 0, config: GeneratorConfig | None = None) -> None:
        self.db = db
        self.rng = random.Random(seed)
        self.config = config or GeneratorConfig()
        self.domains = [d for d in DOMAINS if db.get(d)]
        if not self.domains:
            raise ValueError("the database has no rows in any ToolWOZ domain")

    def task(self, task_id: str, *, split: str | None = None) -> Task:
        """One task with 1-3 domains sharing a travel day."""
        rng, cfg = self.rng, self.config
        if len(self.domains) == 1 or rng.random() < cfg.single_domain:
            count = 1
        else:
            count = 3 if len(self.domains) >= 3 and rng.random() < cfg.three_domains else 2
        chosen = sorted(rng.sample(self.domains, count), key=DOMAINS.index)
        day = rng.choice(DAYS)
        goal: dict[str, DomainGoal] = {}
        booked: dict[str, dict[str, str]] = {}
        for domain in chosen:
            spec, entity = self._train_goal(day) if domain == "train" else self._entity_goal(domain, day)
            goal[domain] = spec
            if entity is not None:
                booked[domain] = entity
        order = list(goal)
        rng.shuffle(order)
        text = render_goal({d: goal[d] for d in order}, rng)
        return make_task(task_id, goal, booked=booked, user_goal=text, split=split)

    def tasks(self, n: int, *, prefix: str = "gen", split: str | None = None) -> list[Task]:
        """``n`` tasks with ids ``{prefix}_0000``, ``{prefix}_0001``, ..."""
        return [self.task(f"{prefix}_{i:04d}", split=split) for i in range(n)]

    def _entity_goal(self, domain: str, day: str) -> tuple[DomainGoal, dict[str, str] | None]:
        rng, cfg = self.rng, self.config
        rows = self.db[domain]
        target = rng.choice(rows)
        usable = [a for a in SEARCH_ATTRIBUTES.get(domain, ()) if str(target.get(a, "")).lower() not in _EMPTY]
        if "name" in target and (not usable or rng.random() < cfg.by_name):
            info = {"name": str(target["name"])}
        else:
            keys = rng.sample(usable, rng.randint(1, min(4, len(usable))))
            info = {k: str(target[k]) for k in usable if k in keys}
        fail_info = self._fail_info(rows, info, domain) if rng.random() < cfg.fail_info else {}
        book, fail_book, entity = {}, {}, None
        if domain in ("restaurant", "hotel") and "name" in target and rng.random() < cfg.book:
            book = self._book_slots(domain, day)
            if rng.random() < cfg.fail_book:
                fail_book = self._fail_book(domain, book)
            entity = {"name": str(target["name"]), "reference": _reference(rng)}
        return DomainGoal(
            info=info,
            fail_info=fail_info,
            book=book,
            fail_book=fail_book,
            reqt=self._reqt(domain, target, info),
        ), entity

    def _fail_info(self, rows: list[Row], info: dict[str, str], domain: str) -> dict[str, str]:
        """``info`` with one attribute changed so that no row matches; empty when no such change exists."""
        keys = [k for k in info if k != "name"]
        self.rng.shuffle(keys)
        for key in keys:
            values = sorted({str(r[key]) for r in rows if key in r} - {info[key], *_EMPTY})
            self.rng.shuffle(values)
            for value in values:
                attempt = {**info, key: value}
                if not matches(rows, attempt):
                    return attempt
        return {}

    def _book_slots(self, domain: str, day: str) -> dict[str, str]:
        people = str(self.rng.choice((1, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8)))
        if domain == "restaurant":
            hour, minute = self.rng.randint(11, 21), self.rng.choice((0, 15, 30, 45))
            return {"time": f"{hour:02d}:{minute:02d}", "day": day, "people": people}
        return {"stay": str(self.rng.randint(1, 5)), "day": day, "people": people}

    def _fail_book(self, domain: str, book: dict[str, str]) -> dict[str, str]:
        key = self.rng.choice(("time", "day") if domain == "restaurant" else ("stay", "day"))
        if key == "day":
            return {"day": self.rng.choice([d for d in DAYS if d != book["day"]])}
        if key == "stay":
            return {"stay": str(int(book["stay"]) + self.rng.randint(1, 3))}
        hour, minute = (int(p) for p in book["time"].split(":"))
        shifted = (hour * 60 + minute + self.rng.choice((-60, -30, 30, 60))) % (24 * 60)
        return {"time": f"{shifted // 60:02d}:{shifted % 60:02d}"}

    def _reqt(self, domain: str, target: Row, info: dict[str, str]) -> list[str]:
        options = [a for a in REQUESTABLE[domain] if a not in info and str(target.get(a, "")).lower() not in _EMPTY]
        count = self.rng.randint(0, min(self.config.max_reqt, len(options)))
        picked = set(self.rng.sample(options, count))
        return [a for a in options if a in picked]

    def _train_goal(self, day: str) -> tuple[DomainGoal, dict[str, str] | None]:
        """A train goal whose time constraint comes from a real train; the booked train is the one a traveller
        would pick (the first to leave after ``leaveAt``, or the last to arrive before ``arriveBy``)."""
        rng, cfg = self.rng, self.config
        rows = self.db["train"]
        candidates = [r for r in rows if r.get("day") == day and "00:00" < str(r.get("arriveBy", "")) < "23:45"]
        target = rng.choice(candidates or rows)
        route = {k: str(target[k]) for k in ("departure", "destination", "day")}
        if rng.random() < 0.5:
            when = {"leaveAt": _round_time(str(target["leaveAt"]), up=False)}
            found = sorted(matches(rows, {**route, **when}), key=lambda r: str(r["leaveAt"]))[0]
        else:
            when = {"arriveBy": _round_time(str(target["arriveBy"]), up=True)}
            found = sorted(matches(rows, {**route, **when}), key=lambda r: str(r["arriveBy"]))[-1]
        info = {**route, **when}
        book, entity = {}, None
        if rng.random() < cfg.book:
            book = {"people": str(rng.choice((1, 1, 2, 2, 3, 4, 5, 6, 8)))}
            entity = {"trainID": str(found["trainID"]), "reference": _reference(rng)}
        return DomainGoal(info=info, book=book, reqt=self._reqt("train", found, info)), entity


def check_task(task: Task, db: DB) -> list[str]:
    """Problems that would make a task unsolvable on ``db`` (an empty list means it is valid)."""
    details = details_of(task)
    problems: list[str] = []
    for domain in details.domains:
        spec = details.goal[domain]
        rows = db.get(domain, [])
        if spec.info and not matches(rows, spec.info):
            problems.append(f"{task.id}: no {domain} row satisfies info {spec.info}")
        if spec.fail_info and matches(rows, spec.fail_info):
            problems.append(f"{task.id}: {domain} fail_info {spec.fail_info} matches a row")
        entity = details.booked.get(domain)
        if entity is not None:
            key = ENTITY_KEY[domain]
            same = [r for r in rows if _norm(r.get(key, "")) == _norm(entity.get(key, ""))]
            if not same:
                problems.append(f"{task.id}: booked {domain} {entity.get(key)!r} is not in the database")
            elif not matches(same, spec.info):
                problems.append(f"{task.id}: booked {domain} {entity.get(key)!r} does not satisfy {spec.info}")
    if not task.goals:
        problems.append(f"{task.id}: no goals")
    return problems


def generate(db_dir: str | Path, n: int, *, seed: int = 0, prefix: str = "gen", split: str | None = None) -> list[Task]:
    """``n`` valid tasks over the database folder ``db_dir``."""
    return GoalGenerator(load_db(db_dir), seed=seed).tasks(n, prefix=prefix, split=split)
