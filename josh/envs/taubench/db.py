"""Reading a τ-bench data folder: the files must be there, and every record must have the fields the tools read."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from josh.util.jsonl import brief

Record = dict[str, Any]


class Shape(BaseModel):
    """The fields the tools read from a record, with their JSON types (strict: ``"12.5"`` is not a price); the
    record's other fields are kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True)


def check_data_dir(data_dir: Path | str, env: str, files: Iterable[str], error: type[ValueError]) -> Path:
    """Resolve ``data_dir`` and make sure ``files`` are there, with a hint on how to get them."""
    path = Path(data_dir).expanduser().resolve()
    missing = [name for name in files if not (path / name).is_file()]
    if missing:
        raise error(
            f"{env} data folder {path} lacks {', '.join(missing)}; "
            f"fetch it with `josh data download {env} --dest {path}`"
        )
    return path


def read_records(path: Path, shape: type[BaseModel], kind: str, error: type[ValueError]) -> dict[str, Record]:
    """A JSON object of ``kind`` records keyed by id, each checked against ``shape``; the first bad one raises
    ``error`` naming the file, the record and the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise error(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise error(f"{path} must hold a JSON object of {kind}s keyed by id")
    for key, record in data.items():
        try:
            shape.model_validate(record)
        except ValidationError as exc:
            raise error(f"{path}: {kind} {key}: {brief(exc)}") from None
    return data
