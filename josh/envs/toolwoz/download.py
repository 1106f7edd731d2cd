"""Fetch MultiWOZ 2.1 (dialogues, split lists, databases) from its public GitHub repository, for users online.

Source: ``github.com/budzianowski/multiwoz`` — ``data/MultiWOZ_2.1.zip`` for ``data.json`` and the split lists,
``db/{domain}_db.json`` for the databases. The result is a folder ``load_toolwoz`` reads directly:

    DEST/data.json  DEST/testListFile.json  DEST/valListFile.json  DEST/db/{restaurant,hotel,attraction,train}_db.json

``toolwoz`` also converts the dialogues to ``DEST/tasks_{train,val,test,full_test}.jsonl`` so later loads are fast.
A download that fails (or is interrupted) removes the files and folders it created, so it leaves no half-filled
folder that would later look like data.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from josh.envs.toolwoz.data import write_tasks
from josh.envs.toolwoz.multiwoz import load_multiwoz

REPOSITORY = "https://raw.githubusercontent.com/budzianowski/multiwoz/master"
ARCHIVE_URL = f"{REPOSITORY}/data/MultiWOZ_2.1.zip"
DB_URL = f"{REPOSITORY}/db/{{domain}}_db.json"
DB_DOMAINS = ("restaurant", "hotel", "attraction", "train")
ARCHIVE_FILES = ("data.json", "testListFile.json", "valListFile.json")

Opener = Callable[[str], IO[bytes]]


class DownloadError(RuntimeError):
    """A download failed or what it fetched is not what was expected."""


def fetch(url: str, dest: Path, *, opener: Opener | None = None, progress: Progress | None = None) -> Path:
    """Stream ``url`` to ``dest`` (through a ``.part`` file, so a failed download leaves nothing behind)."""
    open_url = opener or (lambda u: urllib.request.urlopen(u, timeout=60))
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open_url(url) as response, part.open("wb") as out:
            size = int(getattr(response, "headers", {}).get("Content-Length") or 0) or None
            job = progress.add_task(dest.name, total=size) if progress else None
            while chunk := response.read(1 << 16):
                out.write(chunk)
                if progress is not None and job is not None:
                    progress.advance(job, len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"could not download {url}: {exc}") from exc
    part.replace(dest)
    return dest


def unpack_archive(archive: Path, dest: Path, names: tuple[str, ...] = ARCHIVE_FILES) -> list[Path]:
    """Copy the members called ``names`` (wherever they sit in the archive) into ``dest``."""
    try:
        with zipfile.ZipFile(archive) as zf:
            members = {Path(m).name: m for m in sorted(zf.namelist(), key=len, reverse=True) if "__MACOSX" not in m}
            missing = [n for n in names if n not in members]
            if missing:
                raise DownloadError(f"{archive}: the archive lacks {', '.join(missing)}")
            out = []
            for name in names:
                with zf.open(members[name]) as src, (dest / name).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                out.append(dest / name)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{archive}: not a zip archive ({exc})") from exc
    return out


def verify(dest: Path) -> dict[str, int]:
    """Check the downloaded folder; returns dialogue and row counts, raises ``DownloadError`` on a problem."""
    counts: dict[str, int] = {}
    for name, kind in [("data.json", dict), *((f"db/{d}_db.json", list) for d in DB_DOMAINS)]:
        path = dest / name
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DownloadError(f"{path}: missing or not valid JSON ({exc})") from exc
        if not isinstance(content, kind) or not content:
            raise DownloadError(f"{path}: expected a non-empty JSON {kind.__name__}")
        counts[name] = len(content)
    for name in ARCHIVE_FILES[1:]:
        lines = [x for x in (dest / name).read_text(encoding="utf-8").splitlines() if x.strip()]
        if not lines:
            raise DownloadError(f"{dest / name}: the split list is empty")
        counts[name] = len(lines)
    return counts


@contextmanager
def undone_on_failure(dest: Path) -> Iterator[None]:
    """If the block fails, remove every file and folder under ``dest`` (and ``dest`` and its parents) that it
    created; what was there before stays."""
    created_dirs = [p for p in (dest, *dest.parents) if not p.exists()]
    before = set(dest.rglob("*")) if dest.exists() else set()
    try:
        yield
    except BaseException:
        new = (set(dest.rglob("*")) if dest.exists() else set()) - before
        for path in sorted(new, key=lambda p: len(p.parts), reverse=True):
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            else:
                path.unlink(missing_ok=True)
        for folder in created_dirs:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def download_multiwoz(
    dest: str | Path,
    *,
    archive_url: str = ARCHIVE_URL,
    db_url: str = DB_URL,
    opener: Opener | None = None,
    show_progress: bool = True,
    tasks: bool = False,
) -> dict[str, int]:
    """Download and unpack MultiWOZ 2.1 into ``dest``, with ``tasks`` also the dialogues as ToolWOZ task files;
    returns what ``verify`` counted (and the task counts)."""
    dest = Path(dest)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with undone_on_failure(dest):
        (dest / "db").mkdir(parents=True, exist_ok=True)
        with Progress(*columns, disable=not show_progress) as progress:
            archive = fetch(archive_url, dest / "MultiWOZ_2.1.zip", opener=opener, progress=progress)
            for domain in DB_DOMAINS:
                url = db_url.format(domain=domain)
                fetch(url, dest / "db" / f"{domain}_db.json", opener=opener, progress=progress)
        unpack_archive(archive, dest)
        archive.unlink()
        counts = verify(dest)
        if tasks:
            for split, split_tasks in load_multiwoz(dest, db_dir=dest / "db").items():
                write_tasks(dest / f"tasks_{split}.jsonl", split_tasks)
                counts[f"tasks_{split}"] = len(split_tasks)
        return counts


def download_toolwoz(dest: str | Path, **options: Any) -> dict[str, int]:
    """``download_multiwoz`` (same options) with the ToolWOZ task files; returns file and task counts."""
    return download_multiwoz(dest, tasks=True, **options)
