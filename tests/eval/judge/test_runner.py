"""``josh judge`` end to end with a scripted judge: every reply of a finished evaluation judged once, failures counted
and retried on the next run, the policy dimension judged only where the environment has a policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.evaluate import load_results
from josh.eval.judge.runner import load_judgements, reply_turns

GOOD = json.dumps({n: {"score": 4, "why": "fine"} for n in ("cohesion", "backend", "policy")})


def evaluate(out: Path) -> None:
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "2", "--no-progress", "--out", str(out)]
    assert CliRunner().invoke(app, args).exit_code == 0


def judge(out: Path, replies: list[str]) -> object:
    args = ["judge", str(out), "--judge", "scripted:smollm2", "--judge-option", f"replies={json.dumps(replies)}"]
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
    assert summary["not_applicable"] == {} and summary["scores"]["policy"]["mean"] == 4.0  # ToolWOZ's written policy
    assert summary["scores"]["cohesion"]["mean"] == 4.0
    assert summary["llm_calls"] == replies and summary["judge"] == "scripted:smollm2"

    again = judge(out, [GOOD])
    assert again.exit_code == 0, again.output
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["replies"] == replies and summary["failed"] == 0
    assert len(load_judgements(out)) == replies + failed  # only the failed ones were judged again
    assert "cohesion" in again.output


def test_a_folder_without_conversations_is_one_clear_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["judge", str(tmp_path), "--env", "toolwoz", "--judge", "scripted:smollm2"])
    assert result.exit_code == 2 and "no conversations to judge" in result.output


def test_the_judge_reads_the_reply_its_context_and_the_policy() -> None:
    from josh.envs import build_env
    from josh.eval.judge.rubric import judge_grammar, judge_messages
    from josh.eval.judge.runner import policy_of
    from josh.types import ToolCall, assistant, tool_result, user

    policy = policy_of(build_env("toolwoz", "mini"))
    assert policy is not None and "reference number" in policy
    context = [
        user("A cheap chinese place, please."),
        assistant(calls=[ToolCall(name="search_restaurant", arguments={})]),
    ]
    context.append(tool_result(context[-1].tool_calls[0].id, '{"name": "golden wok"}'))
    system, prompt = judge_messages(context, assistant("Golden Wok is booked, reference X1."), policy)
    assert '"policy": {"score"' in system.content
    assert (
        "AGENT CALLS search_restaurant({})" in prompt.content
        and 'TOOL RESULT: {"name": "golden wok"}' in prompt.content
    )
    assert prompt.content.index("REPLY TO GRADE: Golden Wok is booked") < prompt.content.index("DOMAIN POLICY:")
    without = judge_messages(context, assistant("Hello"), None)
    assert '"policy"' not in without[0].content and "DOMAIN POLICY" not in without[1].content
    assert '"policy"' in judge_grammar(True) and '"policy"' not in judge_grammar(False)


def test_the_judge_grammar_compiles_for_llguidance() -> None:
    pytest.importorskip("llguidance")
    from josh.eval.judge.rubric import judge_grammar
    from josh.llm.hf_grammar import grammar_problem

    assert grammar_problem(judge_grammar(True)) is None and grammar_problem(judge_grammar(False)) is None


@pytest.mark.slow
def test_smollm2_judges_under_the_grammar_and_every_answer_parses(tmp_path: Path) -> None:
    """One agent turn, so one reply to judge: SmolLM2 writes up to 400 grammar-constrained tokens per judgement, the
    cost of this test (every reply judged is the scripted test's to check)."""
    out = tmp_path / "eval"
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "1", "--max-turns", "1", "--no-progress"]
    assert CliRunner().invoke(app, [*args, "--out", str(out)]).exit_code == 0
    result = CliRunner().invoke(app, ["judge", str(out), "--judge", "hf:smollm2"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["failed"] == 0 and summary["replies"] == sum(len(reply_turns(r)) for r in load_results(out)) >= 1
    assert set(summary["scores"]) == {"cohesion", "backend", "policy"}
    assert all(1 <= j.scores[n] <= 5 for j in load_judgements(out) for n in j.scores)


def test_a_reply_too_long_for_the_judge_is_finished_counted_apart_and_never_retried(tmp_path: Path) -> None:
    import asyncio

    from josh.core.llm import ContextLengthError
    from josh.envs import build_env
    from josh.eval.judge.runner import judge_run
    from josh.llm.scripted import ScriptedLLM

    out = tmp_path / "eval"
    evaluate(out)
    replies = sum(len(reply_turns(r)) for r in load_results(out))
    calls = iter(range(10**6))

    def every_other_too_long(messages, tools, index):
        if next(calls) % 2 == 0:
            raise ContextLengthError("prompt has 9000 tokens, over the limit of 8192")
        return GOOD

    env, llm = build_env("toolwoz", "mini"), ScriptedLLM(every_other_too_long)
    summary = asyncio.run(judge_run(out, env, llm, judge="scripted:x", grammar=False, concurrency=1))
    too_long = (replies + 1) // 2
    assert (summary.overflowed, summary.failed, summary.replies) == (too_long, 0, replies)
    assert (llm.usage.errors, llm.usage.overflows) == (0, too_long)
    again = asyncio.run(judge_run(out, env, ScriptedLLM([GOOD]), judge="scripted:x", grammar=False))
    assert again.overflowed == too_long and len(load_judgements(out)) == replies, "nothing judged again"
