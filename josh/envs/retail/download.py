"""Fetch the τ-bench retail data from its public GitHub repository into a data folder.

Source: https://github.com/sierra-research/tau-bench (MIT, © 2024 Sierra), pinned to one commit. The database
files and the policy (``wiki.md``, saved as ``policy.md``) are copied as they are; the task lists exist upstream
only as Python files, so they are parsed with ``ast`` (never executed) and written as ``tasks_<split>.json``.
"""

from __future__ import annotations

import ast
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from josh.util.atomic import write_atomic

UPSTREAM_REPO = "sierra-research/tau-bench"
UPSTREAM_COMMIT = "59a200c6d575d595120f1cb70fea53cef0632f6b"
UPSTREAM_DIR = "tau_bench/envs/retail"
COPIED = {"data/users.json": "users.json", "data/orders.json": "orders.json", "data/products.json": "products.json"}
TEXTS = {"wiki.md": "policy.md"}
TASK_FILES = {
    "tasks_train.py": "tasks_train.json",
    "tasks_dev.py": "tasks_dev.json",
    "tasks_test.py": "tasks_test.json",
}

Fetch = Callable[[str], bytes]


class DownloadError(RuntimeError):
    """A file could not be fetched or did not have the expected content."""


def raw_url(path: str, commit: str = UPSTREAM_COMMIT) -> str:
    return f"https://raw.githubusercontent.com/{UPSTREAM_REPO}/{commit}/{path}"


def http_fetch(url: str, timeout: float = 60.0) -> bytes:
    """GET ``url``; network failures become ``DownloadError``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (fixed https URL)
            return response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise DownloadError(f"cannot fetch {url}: {exc}") from exc


def _value(node: ast.AST) -> Any:
    """A literal, or a keyword-only ``Task(...)`` / ``Action(...)`` call turned into a dict."""
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in ("Task", "Action") or node.args:
            raise ValueError(f"line {node.lineno}: only keyword calls to Task(...) and Action(...) are allowed")
        fields = {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg is not None}
        if len(fields) != len(node.keywords):
            raise ValueError(f"line {node.lineno}: **kwargs are not allowed")
        if node.func.id == "Action":
            return {"name": fields.get("name"), "kwargs": fields.get("kwargs", fields.get("arguments", {}))}
        return {"outputs": [], **fields}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError(f"line {node.lineno}: dict unpacking is not allowed")
        return {ast.literal_eval(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    return ast.literal_eval(node)


def tasks_from_python(source: str) -> list[dict[str, Any]]:
    """The task list of an upstream ``tasks_*.py`` file, read without executing it."""
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise DownloadError(f"task file is not valid Python: {exc}") from exc
    lists = [
        stmt.value
        for stmt in module.body
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.List)
    ]
    if len(lists) != 1:
        raise DownloadError(f"expected one top-level task list, found {len(lists)}")
    try:
        tasks = _value(lists[0])
    except (ValueError, SyntaxError) as exc:
        raise DownloadError(f"unexpected content in task file: {exc}") from exc
    if not all(isinstance(t, dict) and "user_id" in t and "actions" in t for t in tasks):
        raise DownloadError("every task entry must be a Task(...) with user_id and actions")
    return tasks


def download_retail(dest: Path | str, *, commit: str = UPSTREAM_COMMIT, fetch: Fetch | None = None) -> list[Path]:
    """Download users/orders/products JSON, the policy and the three task splits into ``dest``; returns the files.

    Everything is fetched and checked before anything is written, so a failed download leaves ``dest`` as it was.
    ``fetch`` (default: an HTTPS GET) maps a URL to its bytes.
    """
    fetch = fetch or http_fetch
    files: dict[str, bytes] = {}
    for source, name in COPIED.items():
        data = fetch(raw_url(f"{UPSTREAM_DIR}/{source}", commit))
        try:
            json.loads(data)
        except ValueError as exc:
            raise DownloadError(f"{source} is not valid JSON: {exc}") from exc
        files[name] = data
    for source, name in TEXTS.items():
        files[name] = fetch(raw_url(f"{UPSTREAM_DIR}/{source}", commit))
    for source, name in TASK_FILES.items():
        tasks = tasks_from_python(fetch(raw_url(f"{UPSTREAM_DIR}/{source}", commit)).decode("utf-8"))
        files[name] = json.dumps(tasks, indent=2, ensure_ascii=False).encode("utf-8")
    files["LICENSE.txt"] = fetch(raw_url("LICENSE", commit))
    out = Path(dest).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        write_atomic(out / name, data)
        written.append(out / name)
    return written
