"""Fetch the τ-bench airline data from its public GitHub repository into a data folder.

Source: https://github.com/sierra-research/tau-bench (MIT, © 2024 Sierra), the commit retail uses. The database
files and the policy (``wiki.md``, saved as ``policy.md``) are copied as they are; the task list exists upstream
only as a Python file, so it is parsed with ``ast`` (never executed) and written as ``tasks_test.json``. The
downloaded folder is loaded and checked before anything is written.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from josh.envs.airline.db import AirlineDataError, read_db
from josh.envs.airline.tasks import load_tasks
from josh.envs.retail.download import UPSTREAM_COMMIT, DownloadError, Fetch, http_fetch, raw_url, tasks_from_python

UPSTREAM_DIR = "tau_bench/envs/airline"
COPIED = {
    "data/users.json": "users.json",
    "data/reservations.json": "reservations.json",
    "data/flights.json": "flights.json",
    "wiki.md": "policy.md",
}
TASK_FILES = {"tasks_test.py": "tasks_test.json"}

__all__ = ["UPSTREAM_COMMIT", "DownloadError", "download_airline"]


def _fetch_all(commit: str, fetch: Fetch) -> dict[str, bytes]:
    files = {name: fetch(raw_url(f"{UPSTREAM_DIR}/{source}", commit)) for source, name in COPIED.items()}
    for source, name in TASK_FILES.items():
        tasks = tasks_from_python(fetch(raw_url(f"{UPSTREAM_DIR}/{source}", commit)).decode("utf-8"))
        files[name] = json.dumps(tasks, indent=2, ensure_ascii=False).encode("utf-8")
    files["LICENSE.txt"] = fetch(raw_url("LICENSE", commit))
    return files


def _check(files: dict[str, bytes]) -> None:
    """Load the fetched files as a data folder would be loaded; any problem becomes a ``DownloadError``."""
    with tempfile.TemporaryDirectory() as scratch:
        for name, data in files.items():
            (Path(scratch) / name).write_bytes(data)
        try:
            db = read_db(scratch)
            load_tasks(scratch, "test", db.users)
        except AirlineDataError as exc:
            raise DownloadError(f"the downloaded airline data does not load: {exc}") from exc


def download_airline(dest: Path | str, *, commit: str = UPSTREAM_COMMIT, fetch: Fetch | None = None) -> list[Path]:
    """Download users/reservations/flights JSON, the policy and the test tasks into ``dest``; returns the files.

    Everything is fetched and checked before anything is written, so a failed download leaves ``dest`` as it was.
    ``fetch`` (default: an HTTPS GET) maps a URL to its bytes.
    """
    files = _fetch_all(commit, fetch or http_fetch)
    _check(files)
    out = Path(dest).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        part = out / (name + ".part")
        part.write_bytes(data)
        part.replace(out / name)
        written.append(out / name)
    return written
