"""A real judge behind a real server (slow): ``josh serve``'s server (``transformers serve`` of SmolLM2 on loopback)
judges a scripted evaluation through the openai backend, with ``josh eval --judge`` and then ``josh judge``. A 135M
model may not follow the answer format: the test checks the plumbing (every reply has a judgement, every request
reached the server), not the scores, so the judge writes at most ``JUDGE_TOKENS`` tokens an answer (400 by default):
an answer cut short is a counted failed judgement, asked again by ``josh judge``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import ModelServer
from josh.eval.evaluate import load_results
from josh.eval.judge.runner import load_judgements, reply_turns

pytestmark = pytest.mark.slow
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SCRIPTED = ["--agent", "oracle", "--user", "agenda", "--limit", "1", "--max-turns", "1", "--no-progress"]
JUDGE_TOKENS = 24


@pytest.fixture(scope="module")
def server(smollm2_server: ModelServer) -> Iterator[ModelServer]:
    """The SmolLM2 server ``tests/cli/conftest.py`` shares with ``test_serve_real.py``, reached without a proxy."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.lower() in ("http_proxy", "https_proxy", "all_proxy")}
    yield smollm2_server
    os.environ.update(saved)


def settings(server: ModelServer, flag: str) -> list[str]:
    """The judge's endpoint, patience (the server answers one request at a time on a busy CPU) and token limit."""
    options = [flag, f"base_url={server.base_url}", flag, "timeout_s=600", flag, "max_concurrency=1"]
    return [*options, "--judge-max-tokens", str(JUDGE_TOKENS)]


def assert_every_reply_judged(out: Path) -> None:
    wanted = {(r.task_id, r.trial, t) for r in load_results(out) for t in reply_turns(r)}
    judgements = load_judgements(out)
    assert wanted and {j.key for j in judgements} == wanted  # a failed answer is retried: a key may repeat
    failed_requests = [j.error for j in judgements if j.error and j.error.startswith("judge request failed")]
    assert not failed_requests  # every request reached the server (a grammar it takes none of: HTTP 422)
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["replies"] == len(wanted) and summary["llm_calls"] == len(judgements)
    assert summary["run"]["judge_max_tokens"] == JUDGE_TOKENS
    assert summary["completion_tokens"] <= JUDGE_TOKENS * summary["llm_calls"]  # the limit reached the server
    assert 0 <= summary["failed"] <= len(wanted)


def test_josh_eval_judge_then_josh_judge_through_the_server(server: ModelServer, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["eval", *SCRIPTED, "--out", str(out), "--judge", f"openai:{server.model}", "--no-judge-grammar"]
    result = CliRunner().invoke(app, [*args, *settings(server, "--judge-option")])
    assert result.exit_code == 0, result.output
    assert_every_reply_judged(out)
    # josh judge on the same folder resumes: it asks again only for the answers that failed to parse
    args = ["judge", str(out), "--judge", f"openai:{server.model}", "--no-judge-grammar"]  # it takes no grammar
    result = CliRunner().invoke(app, [*args, "--concurrency", "1", *settings(server, "--judge-option")])
    assert result.exit_code == 0, result.output
    assert_every_reply_judged(out)
