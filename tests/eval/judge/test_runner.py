"""``josh judge`` end to end with a scripted judge: every reply of a finished evaluation judged once, failures counted
and retried on the next run, the policy dimension judged only where the environment has a policy."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.evaluate import load_results
from josh.eval.judge.runner import load_judgements, reply_turns

GOOD = json.dumps({n: {"score": 4, "why": "fine"} for n in ("cohesion", "backend", "policy")})


def evaluate(out: Path) -> None:
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "2", "--no-progress", "--out", str(out)]
    assert CliRunner().invoke(app, args).exit_code == 0


def judge(out: Path, replies: list[str]) -> object:
    args = ["judge", str(out), "--backend", "scripted", "--llm-option", f"replies={json.dumps(replies)}"]
    return CliRunner().invoke(app, args)


def test_every_reply_is_judged_and_a_failure_is_retried(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    evaluate(out)
    replies = sum(len(reply_turns(r)) for r in load_results(out))
    assert replies >= 2
    first = judge(out, ["no idea", GOOD])  # cycled over the calls: the 1st, 3rd, ... answer has no score
    assert first.exit_code == 0, first.output
    failed = (replies + 1) // 2
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["replies"] == replies and summary["failed"] == failed
    assert summary["not_applicable"] == {"policy": replies - failed}  # ToolWOZ has no written policy yet
    assert summary["scores"]["cohesion"]["mean"] == 4.0 and "policy" not in summary["scores"]
    assert summary["llm_calls"] == replies and summary["judge"] == "scripted:smollm2"

    again = judge(out, [GOOD])
    assert again.exit_code == 0, again.output
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["replies"] == replies and summary["failed"] == 0
    assert len(load_judgements(out)) == replies + failed  # only the failed ones were judged again
    assert "cohesion" in again.output


def test_a_folder_without_conversations_is_one_clear_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["judge", str(tmp_path), "--env", "toolwoz", "--backend", "scripted"])
    assert result.exit_code == 2 and "no conversations to judge" in result.output
