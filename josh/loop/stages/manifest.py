"""Per-stage manifests: a stage is skipped when its folder holds a complete manifest for the same inputs.

A manifest (``<stage>/manifest.json``) records the stage's configuration and a digest of every input (file content
hashes, folder hashes, or plain identifiers), and whether the stage finished. Rerunning a stage:

* same key, complete, and the output still there: skipped;
* same key, not complete (the process died inside it): run again, and the stage's own resume continues the work;
* different key (the recipe or an input changed): the old folder is moved aside to ``<stage>.stale-<time>``, never
  deleted, and the stage runs from scratch.

A stage whose settings gained a key in a later version of josh also passes the settings as earlier versions recorded
them (``earlier``), so a run folder made before keeps resuming and its report can still be rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from josh.util.atomic import write_atomic
from josh.util.layout import MANIFEST

Input = str | Path


class Manifest(BaseModel):
    """What ``manifest.json`` holds."""

    stage: str
    key: str
    config: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    complete: bool = False
    started_at: float = 0.0
    finished_at: float | None = None
    wall_s: float | None = None
    load_start: list[float] | None = Field(None, description="the machine's 1, 5 and 15-minute load averages at start")
    load_end: list[float] | None = Field(None, description="the same when the stage finished")


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def input_digest(value: Input) -> str:
    """A file's content hash; a folder's hash over its top-level files (an adapter folder: weights, config,
    tokenizer; trainer ``checkpoint-N`` subfolders are ignored); anything else is an identifier taken as is."""
    path = Path(value)
    if path.is_file():
        return file_digest(path)
    if path.is_dir():
        h = hashlib.sha256()
        for child in sorted(p for p in path.iterdir() if p.is_file() and p.name != MANIFEST):
            h.update(child.name.encode() + b"\0" + file_digest(child).encode() + b"\0")
        return h.hexdigest()
    return f"id:{value}"


def stage_key(config: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    blob = json.dumps({"config": config, "inputs": dict(inputs)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or ``None`` when it has none or it is unreadable."""
    path = folder / MANIFEST
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write(folder: Path, manifest: Manifest) -> None:
    write_atomic(folder / MANIFEST, manifest.model_dump_json(indent=2) + "\n")


def _set_aside(folder: Path) -> Path:
    target = folder.with_name(f"{folder.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while target.exists():
        target = folder.with_name(f"{folder.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
        n += 1
    folder.rename(target)
    return target


def _done(manifest: Manifest | None, keys: Sequence[str], finished: Callable[[], bool]) -> bool:
    return manifest is not None and manifest.key in keys and manifest.complete and finished()


def _keys(config: Mapping[str, Any], earlier: Sequence[Mapping[str, Any]], digests: Mapping[str, str]) -> list[str]:
    """The stage's key, then the keys of the same stage as earlier versions of josh recorded it."""
    return [stage_key(c, digests) for c in (config, *earlier)]


def stage_done(
    folder: Path,
    config: Mapping[str, Any],
    inputs: Mapping[str, Input],
    finished: Callable[[], bool] = lambda: True,
    *,
    earlier: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Whether ``run_stage`` would skip this stage: a complete manifest for the same config and inputs, and the
    output still there (reading a run without running anything, e.g. to rebuild its report)."""
    digests = {k: input_digest(v) for k, v in inputs.items()}
    return _done(read_manifest(folder), _keys(config, earlier, digests), finished)


def run_stage(
    name: str,
    folder: Path,
    config: Mapping[str, Any],
    inputs: Mapping[str, Input],
    work: Callable[[], Any],
    *,
    finished: Callable[[], bool] = lambda: True,
    log: Callable[[str], None] = print,
    earlier: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Run ``work`` in ``folder`` unless a complete manifest for the same config and inputs is there.

    ``finished`` says whether the output is still present and whole. Returns true when the stage ran."""
    digests = {k: input_digest(v) for k, v in inputs.items()}
    keys = _keys(config, earlier, digests)
    key = keys[0]
    old = read_manifest(folder)
    if _done(old, keys, finished):
        log(f"[skip] {name}: done for the same inputs ({folder})")
        return False
    if folder.exists() and any(folder.iterdir()) and (old is None or old.key not in keys):
        moved = _set_aside(folder)
        log(f"[stale] {name}: inputs or settings changed; the old output was moved to {moved}")
    resumed = old is not None and old.key in keys
    folder.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(
        stage=name, key=key, config=dict(config), inputs=digests, started_at=time.time(), load_start=_load()
    )
    _write(folder, manifest)
    log(f"[{'resume' if resumed else 'run'}] {name} -> {folder}")
    start = time.perf_counter()
    work()
    manifest.complete = True
    manifest.finished_at = time.time()
    manifest.wall_s = round(time.perf_counter() - start, 3)
    manifest.load_end = _load()
    _write(folder, manifest)
    return True


def _load() -> list[float] | None:
    """The load averages, where the system has them: a stage's wall time means little without them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
