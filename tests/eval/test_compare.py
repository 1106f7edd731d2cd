"""``josh compare``: per-task pooling over a model's evaluations, paired differences, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.compare import CompareError, compare_evaluations, parse_spec


def write_eval(folder: Path, rewards: dict[str, list[float]], split: str = "test") -> str:
    """An evaluation folder as ``josh eval`` leaves it: results.jsonl (one line per trial) and summary.json."""
    folder.mkdir(parents=True)
    lines = [json.dumps({"task_id": t, "trial": k, "reward": r}) for t, rs in rewards.items() for k, r in enumerate(rs)]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = {"env": "toolwoz", "data": "mini", "split": split, "user": "agenda"}
    (folder / "summary.json").write_text(json.dumps({"run": run}), encoding="utf-8")
    return str(folder)


def invoke(*args: str):
    return CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": "200"})


def test_a_model_with_two_evaluations_is_pooled_per_task_before_the_paired_difference(tmp_path: Path) -> None:
    base = write_eval(tmp_path / "base", {"a": [0.0], "b": [1.0], "c": [0.5]})
    seed1 = write_eval(tmp_path / "s1", {"a": [1.0], "b": [1.0], "c": [0.0]})
    seed2 = write_eval(tmp_path / "s2", {"a": [0.0, 1.0], "b": [0.0], "c": [0.5]})  # task a: two trials, mean 0.5
    report = compare_evaluations([f"base={base}", f"josh={seed1},{seed2}"])
    josh = report.models[1]
    assert josh.per_task == {"a": 0.75, "b": 0.5, "c": 0.25}
    (c,) = report.comparisons
    assert (c.model, c.baseline, c.tasks, c.better, c.worse) == ("josh", "base", 3, 1, 2)
    assert c.difference == pytest.approx((0.75 - 0.5 - 0.25) / 3)
    assert c.low <= c.difference <= c.high
    assert report.notes == []


def test_tasks_missing_from_one_evaluation_are_left_out_and_named(tmp_path: Path) -> None:
    base = write_eval(tmp_path / "base", {"a": [0.0], "b": [0.0], "c": [0.0]})
    full = write_eval(tmp_path / "full", {"a": [1.0], "b": [1.0], "c": [1.0]})
    part = write_eval(tmp_path / "part", {"a": [1.0], "b": [1.0]})
    report = compare_evaluations([f"base={base}", f"m={full},{part}"])
    assert report.models[1].tasks == 2 and report.models[1].left_out == 1
    assert report.comparisons[0].tasks == 2
    assert any("1 tasks not finished by all its evaluations" in n for n in report.notes)


def test_baseline_option_picks_the_model_every_other_is_compared_with(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "a", {"t": [0.0]})
    b = write_eval(tmp_path / "b", {"t": [1.0]})
    report = compare_evaluations([f"a={a}", f"b={b}"], baseline="b")
    assert [(c.model, c.baseline, c.difference) for c in report.comparisons] == [("a", "b", -1.0)]


def test_evaluations_on_different_splits_get_a_note(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "a", {"t": [0.0]})
    b = write_eval(tmp_path / "b", {"t": [1.0]}, split="val")
    assert "the evaluations differ in split: test, val" in compare_evaluations([a, b]).notes


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["a=MISSING", "b=B"], "no results.jsonl here"),
        (["a=A"], "at least two models"),
        (["a=A", "a=B"], "repeated: ['a']"),
        (["a=A", "b=OTHER"], "share no task"),
        (["a=A", "b=EMPTY"], "holds no finished conversation"),
        (["a=A", "b=A,OTHER"], "its evaluations share no task"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path: Path, specs: list[str], message: str) -> None:
    folders = {"A": {"t": [1.0]}, "B": {"t": [0.0]}, "OTHER": {"u": [1.0]}, "EMPTY": {}}
    paths = {name: write_eval(tmp_path / name, rewards) for name, rewards in folders.items()}
    paths["MISSING"] = str(tmp_path / "missing")
    resolved = [s.split("=")[0] + "=" + ",".join(paths[p] for p in s.split("=")[1].split(",")) for s in specs]
    with pytest.raises(CompareError, match=message.replace("[", r"\[").replace("]", r"\]")):
        compare_evaluations(resolved)


def test_unknown_baseline_is_refused(tmp_path: Path) -> None:
    a, b = write_eval(tmp_path / "a", {"t": [0.0]}), write_eval(tmp_path / "b", {"t": [1.0]})
    with pytest.raises(CompareError, match="--baseline 'c' is none of the models: a, b"):
        compare_evaluations([f"a={a}", f"b={b}"], baseline="c")


@given(
    label=st.from_regex(r"[A-Za-z0-9_.+-]{1,12}", fullmatch=True),
    paths=st.lists(st.from_regex(r"[a-z0-9_/.-]{1,20}", fullmatch=True), min_size=1, max_size=4),
)
def test_parse_spec_reads_back_label_and_paths(label: str, paths: list[str]) -> None:
    assert parse_spec(f"{label}={','.join(paths)}") == (label, paths)


def test_a_spec_without_label_is_labelled_by_itself() -> None:
    assert parse_spec("runs/x/eval,runs/y/eval") == ("runs/x/eval,runs/y/eval", ["runs/x/eval", "runs/y/eval"])


def test_cli_prints_both_tables_and_json(tmp_path: Path) -> None:
    base = write_eval(tmp_path / "base", {"a": [0.0], "b": [0.0]})
    josh = write_eval(tmp_path / "josh", {"a": [1.0], "b": [0.0]})
    shown = invoke(f"warm={base}", f"josh={josh}")
    assert shown.exit_code == 0, shown.output
    assert "paired per task, minus warm" in shown.output
    assert "+0.500 [+0.000, +1.000]" in shown.output and "1 / 0" in shown.output
    data = json.loads(invoke(f"warm={base}", f"josh={josh}", "--json").output)
    assert data["comparisons"][0]["difference"] == 0.5 and data["models"][1]["per_task"] == {"a": 1.0, "b": 0.0}


def test_cli_reports_a_missing_folder_in_one_line(tmp_path: Path) -> None:
    base = write_eval(tmp_path / "base", {"a": [0.0]})
    result = invoke(f"warm={base}", f"josh={tmp_path / 'nope'}")
    assert result.exit_code == 2
    assert "no results.jsonl here" in result.output and "Traceback" not in result.output
