"""``josh view`` on an evaluation folder: one page per conversation, each judged reply with its scores and reasons
beside it (escaped), and a plain page when the run was never judged."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.evaluate import load_results
from josh.eval.judge.runner import reply_turns

EVAL = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "2", "--no-progress"]
WHY = "<b>invented</b> a hotel"
ANSWER = json.dumps({n: {"score": 2, "why": WHY} for n in ("cohesion", "backend", "policy")})


def test_each_reply_shows_its_judgement(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = [
        *EVAL,
        "--out",
        str(out),
        "--judge",
        "scripted:smollm2",
        "--judge-option",
        f"replies={json.dumps([ANSWER])}",
    ]
    assert CliRunner().invoke(app, args).exit_code == 0
    result = CliRunner().invoke(app, ["view", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 conversations" in result.output
    index = (out / "view" / "index.html").read_text()
    assert "scripted:smollm2" in index
    record = load_results(out)[0]
    page = (out / "view" / f"{record.task_id}-trial{record.trial}.html").read_text()
    replies = len(reply_turns(record))
    assert page.count('class="judgement"') == replies and page.count('<tr class="dimension">') == 3 * replies
    assert "&lt;b&gt;invented&lt;/b&gt; a hotel" in page and WHY not in page
    assert page.count('class="score low"') == 3 * replies


def test_an_unjudged_evaluation_has_pages_without_judgements(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    assert CliRunner().invoke(app, [*EVAL, "--out", str(out)]).exit_code == 0
    assert CliRunner().invoke(app, ["view", str(out)]).exit_code == 0
    index = (out / "view" / "index.html").read_text()
    assert "not judged" in index
    pages = [p for p in (out / "view").glob("*.html") if p.name != "index.html"]
    assert len(pages) == 2 and all('class="judgement"' not in p.read_text() for p in pages)
