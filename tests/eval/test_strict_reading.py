"""Corrupt run files and empty splits stop with the file and line named, never a silent success (issue 13 items
6 and 7); ``josh extract --skip-bad-lines`` is the explicit way past bad lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.retail.db import RetailDataError
from josh.envs.retail.tasks import load_tasks
from josh.envs.toolwoz.data import SHIPPED_MINI, read_tasks
from josh.envs.toolwoz.multiwoz import DataFormatError
from josh.eval.evaluate import evaluate, load_results
from josh.search.rollout import run_rollouts
from josh.util.jsonl import CorruptLineError
from tests.fakes.conversation import CallingAgent, CountingUser, FakeEnv, TableAgent, TableUser, make_task, make_tasks


async def _trees(folder: Path) -> list[str]:
    agent = TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})
    tasks = [make_task(2, "a"), make_task(2, "b"), make_task(3, "c")]
    await run_rollouts(tasks, FakeEnv(), agent, TableUser(), folder, progress=False)
    return (folder / "trees.jsonl").read_text().splitlines()


def _extract(run: Path, *flags: str):
    return CliRunner().invoke(app, ["extract", str(run), "--out", str(run / "data"), *flags])


@pytest.mark.parametrize(
    ("bad", "why"),
    [("{not json", "is not valid JSON"), ('{"task_id": "x", "nodes": 5}', "is not a search tree: nodes")],
)
async def test_extract_stops_at_a_bad_line_mid_file_unless_told_to_skip(tmp_path, bad, why):
    lines = await _trees(tmp_path)
    (tmp_path / "trees.jsonl").write_text("\n".join([lines[0], bad, *lines[1:]]) + "\n")
    strict = _extract(tmp_path)
    assert strict.exit_code == 2
    message = " ".join(strict.output.split())
    assert f"trees.jsonl: line 2 {why}" in message and "--skip-bad-lines" in message
    assert "For further information" not in message
    assert not (tmp_path / "data" / "sft.jsonl").exists()
    skipping = _extract(tmp_path, "--skip-bad-lines")
    assert skipping.exit_code == 0, skipping.output
    stats = json.loads((tmp_path / "data" / "extract_stats.json").read_text())
    assert stats["unreadable"] == 1 and stats["trees"] == 3


async def test_extract_reads_past_a_last_line_cut_short_by_a_crash(tmp_path):
    lines = await _trees(tmp_path)
    (tmp_path / "trees.jsonl").write_text("\n".join(lines) + "\n" + lines[0][:40])
    result = _extract(tmp_path)
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "data" / "extract_stats.json").read_text())
    assert stats["unreadable"] == 1 and stats["trees"] == 3


async def test_a_results_line_that_is_not_a_record_names_file_line_and_field(tmp_path):
    tasks = make_tasks(3)
    await evaluate(FakeEnv(), tasks, CallingAgent(), CountingUser(1), tmp_path)
    results = tmp_path / "results.jsonl"
    lines = results.read_text().splitlines()
    record = json.loads(lines[1])
    del record["reward"]
    results.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n")
    with pytest.raises(CorruptLineError) as caught:
        load_results(tmp_path)
    assert str(caught.value) == f"{results}: line 2 is not a conversation record: reward: Field required"
    with pytest.raises(CorruptLineError):
        await evaluate(FakeEnv(), tasks, CallingAgent(), CountingUser(1), tmp_path)


async def test_nothing_to_run_is_an_error_not_an_empty_summary(tmp_path):
    with pytest.raises(ValueError, match="no tasks to evaluate"):
        await evaluate(FakeEnv(), [], CallingAgent(), CountingUser(1), tmp_path / "eval")
    with pytest.raises(ValueError, match="no tasks to search"):
        await run_rollouts([], FakeEnv(), CallingAgent(), CountingUser(1), tmp_path / "rollout", progress=False)
    assert not (tmp_path / "eval").exists() and not (tmp_path / "rollout").exists()


def test_an_empty_toolwoz_split_fails_the_command_naming_the_file(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_MINI / "db", data / "db")
    shutil.copy(SHIPPED_MINI / "tasks_train.jsonl", data)
    (data / "tasks_test.jsonl").write_text("\n")
    out = tmp_path / "run"
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--data", str(data), "--split", "test"]
    result = CliRunner().invoke(app, [*args, "--no-progress", "--out", str(out)])
    assert result.exit_code == 2
    assert "tasks_test.jsonl: split 'test' holds no tasks" in " ".join(result.output.split())
    assert not (out / "summary.json").exists()


def test_task_line_errors_are_one_sentence(tmp_path):
    path = tmp_path / "tasks_val.jsonl"
    good = (SHIPPED_MINI / "tasks_val.jsonl").read_text().splitlines()[0]
    path.write_text(good + '\n{"id": "v9", "goals": [{"parameters": {}}]}\n')
    with pytest.raises(DataFormatError) as caught:
        read_tasks(path)
    assert str(caught.value) == f"{path}: line 2 (task v9) is not a valid task: goals.0.name: Field required"


def test_retail_split_errors_name_the_file(tmp_path):
    (tmp_path / "tasks_dev.json").write_text("[]")
    with pytest.raises(RetailDataError, match="tasks_dev.json: split 'dev' holds no tasks"):
        load_tasks(tmp_path, "dev")
    (tmp_path / "tasks_test.json").write_text(json.dumps([{"user_id": "u1"}]))
    with pytest.raises(RetailDataError) as caught:
        load_tasks(tmp_path, "test")
    assert str(caught.value) == f"{tmp_path / 'tasks_test.json'}: task 0 is malformed: instruction: Field required"
