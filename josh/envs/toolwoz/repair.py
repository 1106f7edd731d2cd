"""Goals checked against the database, and repaired where the MultiWOZ annotation contradicts it.

Three annotation faults make a ToolWOZ task impossible to complete, whoever plays it: the dialogue spells an
entity otherwise than the database (``ask`` for ``ask restaurant``), the wizard booked an entity that breaks the
user's own constraints (a Friday train for a Thursday goal, a guest house with parking for a goal without), or the
booking names no entity at all. A repair keeps the user's constraints (the goal text says them) and changes only
which entity the booking goal names; a task that no repair makes completable carries a ``defect``. The rules and
their counts are in ``docs/concepts/toolwoz-paper-data.md``.
"""

from __future__ import annotations

from typing import NamedTuple

from josh.envs.toolwoz.db import Table, ToolWOZDB
from josh.envs.toolwoz.normalize import normalize, normalize_args
from josh.envs.toolwoz.task import DomainGoal


class Checked(NamedTuple):
    """A dialogue's goal after the check: the goal, the booked entities, what was repaired, and any defect."""

    goal: dict[str, DomainGoal]
    booked: dict[str, dict[str, str]]
    repairs: dict[str, str]
    defect: str


def _words(name: str) -> tuple[str, ...]:
    words = tuple(normalize(name).split())
    return words[1:] if words[:1] == ("the",) else words


def _contains(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    size = len(inner)
    return size > 0 and any(outer[i : i + size] == inner for i in range(len(outer) - size + 1))


def resolve_name(table: Table, name: str, preferred: frozenset[int]) -> str | None:
    """The database's name for an entity the dialogue names otherwise: the one row whose name contains the
    dialogue's words or is contained in them (among ``preferred`` rows first); None when none or several fit."""
    wanted = _words(name)
    fits = [
        rid
        for rid, values in enumerate(table.values)
        if _contains(_words(values[table.key]), wanted) or _contains(wanted, _words(values[table.key]))
    ]
    chosen = [rid for rid in fits if rid in preferred] or fits
    names = {table.values[rid][table.key] for rid in chosen}
    return str(table.rows[chosen[0]][table.key]) if len(names) == 1 else None


def _stand_in(table: Table, constraints: dict[str, str], satisfying: frozenset[int]) -> int:
    """The row a wizard would have offered: a train leaving soonest after (or arriving latest before) the asked
    time, otherwise the first satisfying row in database order."""
    if table.domain == "train" and "leaveAt" in constraints:
        return min(satisfying, key=lambda rid: (table.leave[rid], rid))
    if table.domain == "train" and "arriveBy" in constraints:
        return min(satisfying, key=lambda rid: (-table.arrive[rid], rid))
    return min(satisfying)


def _broken(table: Table, row_id: int, constraints: dict[str, str]) -> list[str]:
    return [k for k, v in constraints.items() if not table.matches(row_id, table.compile({k: v}))]


def check_domain(
    table: Table, spec: DomainGoal, booked: dict[str, str] | None
) -> tuple[DomainGoal, dict[str, str] | None, str, str]:
    """One domain's goal against its table: (goal, booked entity, repair note, defect)."""
    key, notes = table.key, []
    name = spec.info.get(key) if key == "name" else None
    if name and normalize(name) and not table.rows_with_key(normalize(name)):
        fixed = resolve_name(table, name, frozenset(range(len(table))))
        if fixed is None:
            return spec, booked, "", f"no {table.domain} in the database is called {name!r}"
        spec = spec.model_copy(update={"info": {**spec.info, key: fixed}})
        notes.append(f"name {name!r} is {fixed!r} in the database")
    constraints = normalize_args(spec.info)
    satisfying = table.match_set(table.compile(constraints))
    if booked is None:  # a search goal the database cannot satisfy is still completed by searching its constraints
        return spec, booked, "; ".join(notes), ""
    if constraints and not satisfying:
        return spec, booked, "; ".join(notes), f"no {table.domain} in the database satisfies the search goal"
    value = booked.get(key, "")
    rows = table.rows_with_key(normalize(value)) if value else ()
    if value and not rows and key == "name":
        fixed = resolve_name(table, value, satisfying)
        if fixed is not None:
            notes.append(f"booked {value!r} is {fixed!r} in the database")
            booked, value = {**booked, key: fixed}, fixed
            rows = table.rows_with_key(normalize(fixed))
    if not any(rid in satisfying for rid in rows):
        if not constraints:
            return spec, booked, "; ".join(notes), f"the booked {table.domain} {value!r} is not in the database"
        choice = _stand_in(table, constraints, satisfying)
        why = f"breaks {', '.join(_broken(table, rows[0], constraints))}" if rows else "is not in the database"
        why = why if value else f"booking names no {key}"
        stand_in = str(table.rows[choice][key])
        notes.append(f"booked {value!r} {why}: {stand_in!r} instead" if value else f"{why}: {stand_in!r}")
        booked = {**booked, key: stand_in}
    return spec, booked, "; ".join(notes), ""


def check_goal(goal: dict[str, DomainGoal], booked: dict[str, dict[str, str]], db: ToolWOZDB) -> Checked:
    """Every domain of a dialogue's goal checked (and repaired) against the database."""
    out_goal, out_booked, repairs, defects = dict(goal), dict(booked), {}, []
    for domain, spec in goal.items():
        new_spec, entity, note, defect = check_domain(db[domain], spec, booked.get(domain))
        out_goal[domain] = new_spec
        if entity is not None:
            out_booked[domain] = entity
        if note:
            repairs[domain] = note
        if defect:
            defects.append(defect)
    return Checked(out_goal, out_booked, repairs, "; ".join(defects))
