"""A finished run's file holds one line per key, in task order, whatever stopped the sessions before it: a process
killed half-way through a record, one killed during the compaction; and two runs of one command write the same
records apart from their timing fields."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.evaluate import load_finished
from josh.run.resumable import finished_keys
from josh.util.compaction import beside
from josh.util.jsonl import iter_jsonl
from josh.util.layout import RESULTS, TREES
from tests.fakes.killed_run import TRIALS, components, run
from tests.fakes.process import ROOT

FILE = {"eval": RESULTS, "rollout": TREES}
TIMING = {"eval": [("wall_s",)], "rollout": [("stats", "wall_s")]}
"""The fields of a record that time its making: the only ones two runs of one command may differ in."""


def untimed(record: dict[str, Any], kind: str) -> dict[str, Any]:
    """The record without its timing fields (each must be there: a renamed field fails here, not silently)."""
    record = copy.deepcopy(record)
    for *parents, name in TIMING[kind]:
        inner = record
        for parent in parents:
            inner = inner[parent]
        del inner[name]
    return record


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    return [untimed(json.loads(line), kind) for line in path.read_text(encoding="utf-8").splitlines()]


def key(record: dict[str, Any]) -> tuple[str, int]:
    return record["task_id"], record.get("trial", 0)


def task_order(kind: str) -> list[tuple[str, int]]:
    """The keys of the run in task order (then trial)."""
    trials = TRIALS if kind == "eval" else 1
    return [(task.id, k) for task in components(kind).tasks for k in range(trials)]


def killed(kind: str, out: Path, *args: str) -> None:
    """One session of the run in a child process that kills itself (SIGKILL) where ``args`` say."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.fakes.killed_run", kind, str(out), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


@pytest.mark.parametrize("kind", ["eval", "rollout"])
def test_kills_mid_record_and_mid_compaction_lose_no_record_and_double_none(kind: str, tmp_path: Path) -> None:
    run(kind, tmp_path / "reference")
    expected = records(tmp_path / "reference" / FILE[kind], kind)
    wanted = task_order(kind)
    assert [key(r) for r in expected] == wanted  # the uninterrupted run's file is compacted too

    out, path = tmp_path / "run", tmp_path / "run" / FILE[kind]
    failing = ",".join(sorted({task for task, _ in wanted})[1:3])
    killed(kind, out, "--fail", failing, "--kill", f"record:{len(wanted) - 1}")
    text = path.read_text(encoding="utf-8")
    assert not text.endswith("\n") and text.count("\n") == len(wanted) - 2  # killed half-way through a record
    streamed_failed = sum('"failed":"llm_error' in line for line in text.splitlines()[:-1])  # whole lines only
    assert streamed_failed >= 1

    killed(kind, out, "--kill", "compaction")
    streamed = path.read_text(encoding="utf-8").splitlines()
    assert len(streamed) == len(wanted) + streamed_failed  # each failed line, then the line that supersedes it
    assert beside(path).is_file()  # the compacted file, written in full, never renamed into place
    # the file as the kill left it reads as the whole run: the latest line of each key, each finished
    if kind == "eval":
        assert sorted((r.task_id, r.trial) for r in load_finished(out)) == sorted(wanted)
    else:
        latest = finished_keys((str(r["task_id"]), bool(r.get("failed"))) for r in iter_jsonl(path))
        assert latest == {task for task, _ in wanted}
    with beside(path).open("r+b") as f:  # as a kill during the copy would have left it
        f.truncate(f.seek(0, 2) // 2)

    run(kind, out)
    assert not beside(path).exists()
    assert records(path, kind) == expected


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("rollout", ["rollout", "--agent", "oracle", "--env", "toolwoz", "--data", "mini", "--limit", "3"]),
        ("eval", ["eval", "--agent", "oracle", "--user", "agenda", "--data", "mini", "--limit", "3", "--trials", "2"]),
    ],
)
def test_two_runs_of_one_command_write_the_same_records_apart_from_timing(
    kind: str, args: list[str], tmp_path: Path
) -> None:
    files = []
    for name in ("first", "second"):
        done = CliRunner().invoke(app, [*args, "--out", str(tmp_path / name), "--no-progress"])
        assert done.exit_code == 0, done.output
        files.append(tmp_path / name / FILE[kind])
    first, second = (records(path, kind) for path in files)
    assert first == second and len(first) == (3 if kind == "rollout" else 6)
    made = 0
    for conversation in (c for r in first for c in conversations(r)):
        ids = [c["id"] for m in conversation for c in m.get("tool_calls") or ()]
        assert all(i.startswith("call_") for i in ids) and len(set(ids)) == len(ids)  # unique in a conversation
        assert [m["tool_call_id"] for m in conversation if m["role"] == "tool"] == ids
        made += len(ids)
    assert made


def conversations(record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The agent's messages of each conversation of a record: an evaluation's one, or each leaf's path in a tree."""
    if "nodes" not in record:
        return [record["messages"]]
    nodes = {node["id"]: node for node in record["nodes"]}
    parents = {node["parent"] for node in record["nodes"]}
    paths = []
    for leaf in (n for n in record["nodes"] if n["id"] not in parents):
        path, node = [], leaf
        while node is not None:
            path = node["messages"] + path
            node = nodes.get(node["parent"])
        paths.append(path)
    return paths
