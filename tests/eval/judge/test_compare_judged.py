"""``josh compare`` on judged evaluations: each judge dimension paired per task like the reward, only between
models judged by the same judge."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.compare import compare_evaluations

EVAL = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "3", "--no-progress"]


def scored(score: int) -> str:
    return json.dumps({n: {"score": score, "why": "x"} for n in ("cohesion", "backend", "policy")})


def judged_eval(out: Path, score: int, judge: str = "scripted:smollm2") -> None:
    args = [*EVAL, "--out", str(out), "--judge", judge, "--judge-option", f"replies={json.dumps([scored(score)])}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_judge_dimensions_are_paired_per_task(tmp_path: Path) -> None:
    judged_eval(tmp_path / "a", 4)
    judged_eval(tmp_path / "b", 2)
    report = compare_evaluations([f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}"])
    assert {c.dimension for c in report.judged} == {"cohesion", "backend", "policy"}
    for c in report.judged:
        assert c.model == "b" and c.difference == -2.0 and c.tasks == 3 and (c.better, c.worse) == (0, 3)
    result = CliRunner().invoke(app, ["compare", f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}"])
    assert result.exit_code == 0 and "judge scores" in result.output and "-2.000" in result.output


def test_different_judges_or_an_unjudged_model_are_not_compared(tmp_path: Path) -> None:
    judged_eval(tmp_path / "a", 4)
    judged_eval(tmp_path / "b", 2, judge="scripted:other")
    assert CliRunner().invoke(app, [*EVAL, "--out", str(tmp_path / "c")]).exit_code == 0
    report = compare_evaluations([f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", f"c={tmp_path / 'c'}"])
    assert report.judged == [] and len(report.comparisons) == 2
    assert any("different judges" in n for n in report.notes)
    assert any(n.startswith("c: not every evaluation judged") for n in report.notes)
