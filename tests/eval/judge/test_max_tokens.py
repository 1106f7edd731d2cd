"""The judge's token limit (``--judge-max-tokens``, ``JudgeSpec.max_tokens``): it reaches the backend's ``Sampling``
of every judge request from ``josh judge``, ``josh eval --judge``, ``josh arena`` and extraction's judge gate, is
recorded with the judge's settings, and an answer cut short by it is a counted failed judgement."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.judge.reply import reply_judge
from josh.harvest.judge_gate import JudgeGate
from josh.llm.scripted import ScriptedLLM
from josh.run.spec import JudgeSpec
from josh.types import assistant, user
from tests.eval.judge.test_arena import make_run, verdict

GOOD = json.dumps({n: {"score": 4, "why": "fine"} for n in ("cohesion", "backend", "policy")})
EVAL = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "1", "--no-progress"]
JUDGE = ["--judge", "scripted:smollm2", "--judge-option", 'replies=["unused: the test builds its judge"]']


def scripted(monkeypatch: pytest.MonkeyPatch, module: str, replies: list[str]) -> ScriptedLLM:
    """A scripted judge that keeps every request, built in place of ``module``'s ``build_llms``."""
    import importlib

    llm = ScriptedLLM(replies)
    monkeypatch.setattr(importlib.import_module(module), "build_llms", lambda configs: dict.fromkeys(configs, llm))
    return llm


def limits(llm: ScriptedLLM) -> set[int]:
    return {request.sampling.max_new_tokens for request in llm.requests}


def test_eval_and_judge_send_the_limit_and_record_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "eval"
    llm = scripted(monkeypatch, "josh.eval.judge.session", [GOOD])
    # GOOD is longer than 5 (scripted) tokens: cut short, every reply's judgement fails, counted, never fatal
    result = CliRunner().invoke(app, [*EVAL, "--out", str(out), *JUDGE, "--judge-max-tokens", "5"])
    assert result.exit_code == 0, result.output
    assert llm.requests and limits(llm) == {5}
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["failed"] == summary["replies"] > 0 and summary["run"]["judge_max_tokens"] == 5
    assert json.loads((out / "summary.json").read_text())["run"]["judge_max_tokens"] == 5
    again = CliRunner().invoke(app, ["judge", str(out), *JUDGE])  # the failed ones again, at the default
    assert again.exit_code == 0, again.output
    assert limits(llm) == {5, 400}
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["failed"] == 0 and summary["run"]["judge_max_tokens"] == 400
    assert json.loads((out / "summary.json").read_text())["run"]["judge_max_tokens"] == 400


def test_arena_sends_its_verdict_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = scripted(monkeypatch, "josh.eval.judge.arena_runner", [verdict("A")])
    # no plot: importing matplotlib costs seconds, and test_arena.py checks the plot
    monkeypatch.setattr("josh.eval.judge.arena_runner.plot_arena", lambda summary, path: path)
    runs = [str(make_run(tmp_path / word, word, ["t1"])) for word in ("good", "poor")]
    args = ["arena", *runs, "--out", str(tmp_path / "arena"), *JUDGE, "--judge-max-tokens", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(llm.requests) == 2 and limits(llm) == {3}
    summary = json.loads((tmp_path / "arena" / "arena_summary.json").read_text())
    assert summary["max_tokens"] == 3 and summary["failed"] == 2  # cut verdicts name no winner


def test_the_gate_judge_sends_its_limit() -> None:
    gate = JudgeGate(backend="scripted", model="smollm2", max_tokens=7)
    llm = ScriptedLLM([GOOD])
    judged = asyncio.run(reply_judge(None, False, gate.max_tokens)(llm, [user("hi")], assistant("hello")))
    assert limits(llm) == {7} and judged.error is not None  # cut short: a failed judgement, the turn kept


def test_a_limit_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        JudgeSpec(max_tokens=0)
    result = CliRunner().invoke(app, ["judge", str(tmp_path), *JUDGE, "--judge-max-tokens", "0"])
    assert result.exit_code == 2 and "--judge-max-tokens" in result.output
