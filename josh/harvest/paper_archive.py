"""The authors' JOSH rollouts (``llama3-josh-toolwoz-for-KTO.zip`` in the ``josh-train`` wheel) read and checked.

The archive holds ``records/training_data_v2/sim_<ID>.json``, one per ToolWOZ train conversation, each with
``internal_messages`` (what the user saw, one list per final leaf), ``training_paths`` (every tree node's message list as
``[messages, is_successful, is_golden_path]``, dumped at each collapse of the beam) and ``100_percent_reached``.
``read_rollouts`` accepts the wheel or the inner zip, checks every record before returning any, and raises
``PaperArchiveError`` (one line naming the problem) for anything else. ``unpack_toolwoz`` lays out the wheel's
MultiWOZ data as a folder ``load_toolwoz`` reads.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ROLLOUTS_MEMBER = "data/llama3-josh-toolwoz-for-KTO.zip"
RECORD = re.compile(r"^records/training_data_v2/sim_(?P<id>[A-Za-z0-9]+)\.json$")
TOOLWOZ_MEMBERS = {"data/testListFile.json": "testListFile.json", "data/valListFile.json": "valListFile.json"}
DB_MEMBERS = ("restaurant_db.json", "hotel_db.json", "attraction_db.json", "train_db.json")


class PaperArchiveError(ValueError):
    """An archive that is not the authors' rollouts (or their wheel)."""


class PaperMessage(BaseModel):
    """One chat message as the authors stored it."""

    model_config = ConfigDict(extra="forbid")

    role: str
    content: str


class PaperRollout(BaseModel):
    """One ``sim_<ID>.json``: a whole JOSH tree of one conversation."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    dialogue_id: str = ""
    internal_messages: list[list[PaperMessage]]
    training_paths: list[tuple[list[PaperMessage], bool, bool]]
    reached_100: bool = Field(alias="100_percent_reached")


def _open_rollouts(path: Path) -> zipfile.ZipFile:
    """The rollouts zip inside ``path`` (the wheel) or ``path`` itself."""
    if not path.is_file():
        raise PaperArchiveError(f"{path}: no such file (pass the josh-train wheel or llama3-josh-toolwoz-for-KTO.zip)")
    try:
        outer = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise PaperArchiveError(f"{path}: not a zip archive (pass the josh-train wheel or its rollouts zip)") from None
    if ROLLOUTS_MEMBER not in outer.namelist():
        return outer
    try:
        return zipfile.ZipFile(io.BytesIO(outer.read(ROLLOUTS_MEMBER)))
    except zipfile.BadZipFile:
        raise PaperArchiveError(f"{path}: {ROLLOUTS_MEMBER} inside it is not a zip archive") from None


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"


def read_rollouts(path: str | Path) -> list[PaperRollout]:
    """Every rollout of the archive, sorted by dialogue id; ``PaperArchiveError`` on any other layout."""
    path = Path(path)
    with _open_rollouts(path) as archive:
        members = [(m, RECORD.match(m)) for m in archive.namelist() if not m.endswith("/")]
        records = [(m, found["id"]) for m, found in members if found]
        if not records:
            raise PaperArchiveError(
                f"{path}: no records/training_data_v2/sim_<ID>.json inside; this is not the authors' JOSH rollouts"
            )
        out = []
        for member, dialogue_id in sorted(records, key=lambda r: r[1]):
            try:
                data: Any = json.loads(archive.read(member))
                out.append(PaperRollout.model_validate({**data, "dialogue_id": dialogue_id}))
            except (ValueError, TypeError) as exc:
                why = _problem(exc) if isinstance(exc, ValidationError) else f"not a JSON object ({exc})"
                raise PaperArchiveError(f"{path}: {member} is not a JOSH rollout record: {why}") from None
    return out


def unpack_toolwoz(wheel: str | Path, dest: str | Path) -> Path:
    """Write the wheel's ``data.json``, split lists and the four databases into ``dest`` (a ``load_toolwoz``
    folder); ``PaperArchiveError`` when ``wheel`` is not the josh-train wheel."""
    wheel, dest = Path(wheel), Path(dest)
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError):
        raise PaperArchiveError(f"{wheel}: not the josh-train wheel (no zip archive there)") from None
    with archive:
        names = set(archive.namelist())
        wanted = ["data/dataset.zip", *TOOLWOZ_MEMBERS, *(f"db/{db}" for db in DB_MEMBERS)]
        missing = [m for m in wanted if m not in names]
        if missing:
            raise PaperArchiveError(f"{wheel}: not the josh-train wheel ({', '.join(missing)} missing)")
        (dest / "db").mkdir(parents=True, exist_ok=True)
        for member, name in TOOLWOZ_MEMBERS.items():
            (dest / name).write_bytes(archive.read(member))
        for db in DB_MEMBERS:
            (dest / "db" / db).write_bytes(archive.read(f"db/{db}"))
        inner = zipfile.ZipFile(io.BytesIO(archive.read("data/dataset.zip")))
        with inner, inner.open("data.json") as src, (dest / "data.json").open("wb") as out:
            shutil.copyfileobj(src, out)
    return dest
