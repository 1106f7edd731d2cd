"""``josh eval --judge`` and the judge's honesty: the judge runs after the evaluation with its own cost block, is
named in the run's provenance, warns when it is the agent's own model, and a down endpoint or bad input is one line
or a counted failure, never a crash."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs import build_env
from josh.eval.evaluate import load_results
from josh.eval.judge.rubric import PROMPT_VERSION
from josh.eval.judge.runner import judge_run, load_judgements, reply_turns
from josh.eval.judge.session import self_judging
from josh.llm.health import BackendDownError
from josh.run.spec import JudgeSpec

GOOD = json.dumps({n: {"score": 4, "why": "fine"} for n in ("cohesion", "backend", "policy")})
EVAL = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "2", "--no-progress"]


def scripted_judge(replies: list[str]) -> list[str]:
    return ["--judge", "scripted:smollm2", "--judge-option", f"replies={json.dumps(replies)}"]


def test_eval_judge_runs_the_judge_after_the_evaluation_and_reports_it_apart(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, [*EVAL, "--out", str(out), *scripted_judge([GOOD])])
    assert result.exit_code == 0, result.output
    replies = sum(len(reply_turns(r)) for r in load_results(out))
    evaluation = json.loads((out / "summary.json").read_text())
    judged = json.loads((out / "judge_summary.json").read_text())
    assert judged["replies"] == replies and judged["failed"] == 0 and judged["llm_calls"] == replies
    assert evaluation["llm_calls"] == 0  # the oracle and the agenda user call no LLM: the judge's calls are apart
    assert evaluation["run"]["judge"] == "scripted:smollm2"
    assert evaluation["run"]["judge_prompt_version"] == PROMPT_VERSION
    assert (
        judged["run"]["judge"] == "scripted:smollm2" and judged["run"]["git_commit"] == evaluation["run"]["git_commit"]
    )
    assert result.output.index("average reward") < result.output.index("judge LLM calls")
    assert "warning" not in result.output


def test_a_bad_judge_stops_before_the_evaluation(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, [*EVAL, "--out", str(out), "--judge", "smollm2"])
    assert result.exit_code == 2 and "expected BACKEND:MODEL" in result.output
    assert not (out / "results.jsonl").exists()
    lonely = CliRunner().invoke(app, [*EVAL, "--out", str(out), "--judge-option", "x=1"])
    assert lonely.exit_code == 2 and "--judge-option needs --judge" in lonely.output


def test_self_judging_is_the_agent_backend_and_model() -> None:
    run = {"backend": "hf", "model": "smollm2", "adapter": None}
    assert self_judging(run, JudgeSpec(backend="hf", model="smollm2")) is not None
    assert self_judging(run, JudgeSpec(backend="openai", model="smollm2")) is None
    assert self_judging(run, JudgeSpec(backend="hf", model="other")) is None
    assert self_judging({"backend": None, "model": None}, JudgeSpec(backend="hf", model="smollm2")) is None


def test_josh_judge_warns_when_judging_the_agent_with_its_own_model(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    assert CliRunner().invoke(app, [*EVAL, "--out", str(out)]).exit_code == 0
    summary = json.loads((out / "summary.json").read_text())
    summary["run"].update(backend="scripted", model="smollm2")  # as if a scripted agent had answered
    (out / "summary.json").write_text(json.dumps(summary))
    args = ["judge", str(out), "--judge", "scripted:smollm2", "--judge-option", f"replies={json.dumps([GOOD])}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "the agent's own model" in result.output
    assert json.loads((out / "summary.json").read_text())["run"]["judge"] == "scripted:smollm2"


def test_another_judge_judges_every_reply_afresh(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    assert CliRunner().invoke(app, [*EVAL, "--out", str(out), *scripted_judge([GOOD])]).exit_code == 0
    replies = len(load_judgements(out))
    low = json.dumps({n: {"score": 2, "why": "meh"} for n in ("cohesion", "backend", "policy")})
    args = ["judge", str(out), "--judge", "scripted:other", "--judge-option", f"replies=[{low!r}]"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["judge"] == "scripted:other" and summary["scores"]["cohesion"]["mean"] == 2.0
    assert summary["llm_calls"] == replies and len(load_judgements(out)) == 2 * replies


def test_a_down_endpoint_stops_the_judging_with_its_failures_kept_for_a_rerun(tmp_path: Path) -> None:
    from josh.llm.openai import OpenAILLM

    out = tmp_path / "eval"
    assert CliRunner().invoke(app, [*EVAL, "--out", str(out)]).exit_code == 0
    llm = OpenAILLM("judge", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.0, timeout_s=2.0)

    async def session():
        try:
            return await judge_run(out, build_env("toolwoz", "mini"), llm, judge="openai:judge", grammar=False)
        finally:
            await llm.aclose()

    with pytest.raises(BackendDownError, match=r"openai:judge at \S+ is down: all \d+ requests failed"):
        asyncio.run(session())
    # the failures written before the stop are failed judgements: counted, never scores, retried on rerun
    assert llm.retries and all("judge request failed" in (j.error or "") for j in load_judgements(out))


def test_josh_judge_on_a_down_endpoint_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    assert CliRunner().invoke(app, [*EVAL, "--out", str(out)]).exit_code == 0
    args = ["judge", str(out), "--judge", "openai:m", "--judge-option", "base_url=http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_josh_judge_without_a_folder_is_one_line() -> None:
    result = CliRunner().invoke(app, ["judge", "--judge", "scripted:smollm2"])
    assert result.exit_code == 2 and "give the evaluation folder" in result.output


@pytest.mark.parametrize("command", ["judge", "arena"])
@pytest.mark.parametrize("old", [["--backend", "openai"], ["--model", "gpt-4.1"], ["--no-grammar"]])
def test_the_removed_judge_flags_are_unknown_options(command: str, old: list[str], tmp_path: Path) -> None:
    """``josh judge`` and ``josh arena`` take their judge as every command does: ``--judge BACKEND:MODEL``."""
    args = [command, str(tmp_path), *(["--out", str(tmp_path / "a")] if command == "arena" else []), *old]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "No such option" in result.output


def test_a_judge_option_without_a_judge_is_refused_by_extract(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["extract", str(tmp_path), "--judge-option", "timeout_s=5"])
    assert result.exit_code != 0 and "--judge-option needs --judge BACKEND:MODEL" in result.output
