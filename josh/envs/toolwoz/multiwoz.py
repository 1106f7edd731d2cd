"""Read MultiWOZ 2.x dialogues (``data.json``, or the ToolWOZ release with ``delex.json``) into ToolWOZ tasks.

A dialogue becomes a task when its goal has no taxi, police or hospital part (the ToolWOZ universe). Goals come
from :func:`josh.envs.toolwoz.task.make_task`; this module only reads the files and picks out the pieces: the
per-domain goal, the entity the original dialogue booked, the goal text and the original transcript.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from josh.envs.toolwoz.db import ToolWOZDB
from josh.envs.toolwoz.repair import Checked, check_goal
from josh.envs.toolwoz.task import DOMAINS, ENTITY_KEY, EXCLUDED_DOMAINS, DomainGoal, make_task
from josh.types import Message, Task

OFFICIAL_TEST_SIZE = 450
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


class DataFormatError(ValueError):
    """A data file is missing, unreadable, or holds a record that does not have the expected shape."""


def read_json(path: Path, *, member: str | None = None) -> Any:
    """Parse a JSON file, or ``member`` of the zip archive ``path``; any failure names the file."""
    label = f"{path}:{member}" if member else str(path)
    try:
        if member is None:
            return json.loads(path.read_text(encoding="utf-8"))
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read(member).decode("utf-8"))
    except FileNotFoundError as exc:
        raise DataFormatError(f"{label}: file not found") from exc
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"{label}: cannot read it as JSON ({exc})") from exc


def read_id_list(path: Path) -> list[str]:
    """A MultiWOZ split list: plain text, one dialogue id per line (the ``.json`` name notwithstanding)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataFormatError(f"{path}: cannot read the split list ({exc})") from exc
    return [line.strip() for line in lines if line.strip()]


def goal_text(message: Any) -> str:
    """The goal sentences as plain text: HTML emphasis tags removed, white space collapsed."""
    sentences = [message] if isinstance(message, str) else list(message or [])
    cleaned = (_SPACE.sub(" ", _TAG.sub("", str(s))).strip() for s in sentences)
    return " ".join(s for s in cleaned if s)


def in_universe(goal: Mapping[str, Any]) -> bool:
    """True when the goal has no taxi, police or hospital part."""
    return not any(goal.get(domain) for domain in EXCLUDED_DOMAINS)


def domain_goals(goal: Mapping[str, Any]) -> dict[str, DomainGoal]:
    """The non-empty ToolWOZ domains of a MultiWOZ goal."""
    out: dict[str, DomainGoal] = {}
    for domain in DOMAINS:
        spec = goal.get(domain)
        if not spec:
            continue
        if not isinstance(spec, Mapping):
            raise TypeError(f"goal.{domain} is a {type(spec).__name__}, not an object")
        out[domain] = DomainGoal.model_validate({k: v for k, v in spec.items() if k in DomainGoal.model_fields})
    return out


def booked_entities(log: list[Any], goals: Mapping[str, DomainGoal]) -> dict[str, dict[str, str]]:
    """Per domain with a ``book`` goal, the last entity booked in the last system turn.

    The last system turn is the final log entry when it has metadata, else the one before it. A booked entry
    that lacks its key (``name`` / ``trainID``) takes it from that turn's belief state when the state has it; one
    still without a key is kept (the database check names a stand-in, ``josh.envs.toolwoz.repair``).
    """
    if not log:
        return {}
    last = log[-1] if log[-1].get("metadata") else (log[-2] if len(log) > 1 else {})
    metadata = last.get("metadata") or {}
    out: dict[str, dict[str, str]] = {}
    for domain, spec in goals.items():
        if not spec.book or domain not in metadata:
            continue
        state = metadata[domain] or {}
        booked = (state.get("book") or {}).get("booked") or []
        if not booked:
            continue
        entity = {k: str(v) for k, v in booked[-1].items() if v not in (None, "")}
        key = ENTITY_KEY[domain]
        fallback = (state.get("semi") or {}).get(key)
        if key not in entity and fallback not in (None, "", "not mentioned"):
            entity[key] = str(fallback)
        out[domain] = entity
    return out


def transcript(log: Iterable[Any]) -> list[Message]:
    """The original conversation: turns with metadata are the system's (assistant), the others the user's."""
    return [
        Message(role="assistant" if turn.get("metadata") else "user", content=str(turn.get("text", ""))) for turn in log
    ]


def dialogue_to_task(
    dialogue_id: str,
    record: Mapping[str, Any],
    *,
    goal_record: Mapping[str, Any] | None = None,
    split: str | None = None,
    source: str = "data.json",
    db: ToolWOZDB | None = None,
) -> Task:
    """One MultiWOZ dialogue as a ToolWOZ task, its goal checked against ``db`` when given.

    ``goal_record`` (the same dialogue from ``delex.json`` in the ToolWOZ release) supplies the goal text and the
    booked entities when given; the transcript always comes from ``record``. Errors name the file and the id.
    """
    try:
        goal_source = goal_record if goal_record is not None else record
        goal = goal_source["goal"]
        goals = domain_goals(goal)
        booked = booked_entities(list(goal_source.get("log") or []), goals)
        checked = check_goal(goals, booked, db) if db is not None else Checked(goals, booked, {}, "")
        return make_task(
            task_id=dialogue_id.removesuffix(".json"),
            goal=checked.goal,
            booked=checked.booked,
            repairs=checked.repairs,
            defect=checked.defect,
            user_goal=goal_text(goal.get("message")),
            split=split,
            transcript=transcript(record.get("log") or []),
        )
    except (KeyError, TypeError, AttributeError, IndexError, ValidationError) as exc:
        raise DataFormatError(f"{source}: dialogue {dialogue_id} is malformed ({type(exc).__name__}: {exc})") from exc


def split_ids(universe: Iterable[str], test_list: Iterable[str], val_list: Iterable[str]) -> dict[str, list[str]]:
    """ToolWOZ splits: ``full_test`` = sorted(test ∩ universe), ``test`` its first 450 (the official test set),
    ``val`` = sorted(val ∩ universe), ``train`` = the rest of the universe, sorted."""
    ids = set(universe)
    full_test = sorted(ids & set(test_list))
    val = sorted(ids & set(val_list))
    train = sorted(ids - set(full_test) - set(val))
    return {"train": train, "val": val, "test": full_test[:OFFICIAL_TEST_SIZE], "full_test": full_test}


def universe_ids(dialogues: Mapping[str, Any], source: str = "data.json") -> list[str]:
    """Ids of the dialogues in the ToolWOZ universe."""
    out = []
    for dialogue_id, record in dialogues.items():
        goal = record.get("goal") if isinstance(record, Mapping) else None
        if not isinstance(goal, Mapping):
            raise DataFormatError(f"{source}: dialogue {dialogue_id} has no goal object")
        if in_universe(goal):
            out.append(dialogue_id)
    return out


def build_splits(
    dialogues: Mapping[str, Any],
    test_list: list[str],
    val_list: list[str],
    *,
    goal_records: Mapping[str, Any] | None = None,
    source: str = "data.json",
    db: ToolWOZDB | None = None,
) -> dict[str, list[Task]]:
    """Tasks per split (``train``, ``val``, ``test``, ``full_test``), goals checked against ``db`` when given;
    ``test`` shares its tasks with ``full_test``."""
    ids = split_ids(universe_ids(dialogues, source), test_list, val_list)

    def task(dialogue_id: str, split: str) -> Task:
        goal_record = goal_records.get(dialogue_id) if goal_records is not None else None
        return dialogue_to_task(
            dialogue_id, dialogues[dialogue_id], goal_record=goal_record, split=split, source=source, db=db
        )

    full_test = [task(i, "test") for i in ids["full_test"]]
    return {
        "train": [task(i, "train") for i in ids["train"]],
        "val": [task(i, "val") for i in ids["val"]],
        "test": full_test[:OFFICIAL_TEST_SIZE],
        "full_test": full_test,
    }


def _find(folder: Path, names: Iterable[str]) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def split_lists(folder: Path) -> tuple[list[str], list[str]]:
    """The test and val id lists found in ``folder`` (``testListFile.json``/``.txt``, ``valListFile...``)."""
    test = _find(folder, ("testListFile.json", "testListFile.txt"))
    val = _find(folder, ("valListFile.json", "valListFile.txt"))
    if test is None or val is None:
        raise DataFormatError(
            f"{folder}: the split lists testListFile.json and valListFile.json are missing "
            "(`josh data download` fetches them with the dialogues)"
        )
    return read_id_list(test), read_id_list(val)


def _zip_member(archive: Path, name: str) -> str | None:
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.namelist() if Path(m).name == name and "__MACOSX" not in m]
    except (OSError, zipfile.BadZipFile) as exc:
        raise DataFormatError(f"{archive}: not a readable zip archive ({exc})") from exc
    return min(members, key=len) if members else None


def load_dialogue_source(path: Path) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """``data.json`` (and ``delex.json`` when present) from a folder, a ``data.json`` file or a ``dataset.zip``.

    Returns the dialogues, the goal records (``delex.json``) or None, and a label for error messages.
    """
    if path.is_file() and zipfile.is_zipfile(path):
        data_member = _zip_member(path, "data.json")
        if data_member is None:
            raise DataFormatError(f"{path}: the archive holds no data.json")
        delex_member = _zip_member(path, "delex.json")
        data = read_json(path, member=data_member)
        delex = read_json(path, member=delex_member) if delex_member else None
        label = f"{path}:{data_member}"
    else:
        data_file = path if path.is_file() else path / "data.json"
        delex_file = data_file.parent / "delex.json"
        data = read_json(data_file)
        delex = read_json(delex_file) if delex_file.is_file() else None
        label = str(data_file)
    for name, content in (("data.json", data), ("delex.json", delex)):
        if content is not None and not isinstance(content, dict):
            raise DataFormatError(f"{path}: {name} must map dialogue ids to dialogues")
    return data, delex, label


def load_multiwoz(
    path: str | Path, *, lists_dir: str | Path | None = None, db_dir: str | Path | None = None
) -> dict[str, list[Task]]:
    """Tasks per split from a MultiWOZ folder (``data.json`` + split lists) or the ToolWOZ release layout.

    ``lists_dir`` holds the split lists when they are not beside the data (for a zip: its folder); with ``db_dir``
    (the database folder) every goal is checked and repaired against the database.
    """
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"{path}: no such file or folder")
    data, delex, label = load_dialogue_source(path)
    folder = Path(lists_dir) if lists_dir else (path if path.is_dir() else path.parent)
    test_list, val_list = split_lists(folder)
    db = ToolWOZDB.load(db_dir) if db_dir is not None else None
    return build_splits(data, test_list, val_list, goal_records=delex, source=label, db=db)
