"""τ²'s NL assertions judged through a josh backend (``--env-option judge=BACKEND:MODEL``): τ²'s own prompt reaches
the judge, its answer decides the reward of a task whose reward basis counts NL assertions, a failing judge is a 0.0
reward and never a crash; without a judge they are off, and the summary says so. No task of the pinned release
counts them, so the judged tasks here are given NL_ASSERTION in their reward basis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import josh
from josh.core.llm import LLMError
from josh.envs import build_env
from josh.envs.tau2 import Tau2Error
from josh.llm.scripted import ScriptedLLM
from josh.run.env_judge import attach_judge
from josh.types import Message
from tests.envs.tau2.helpers import gold_closing, gold_script, run_josh

BASE = ["eval", "--env", "tau2-retail", "--split", "base", "--agent", "replay", "--user", "retail_scripted"]


def verdicts(assertions: list[str], met: list[bool]) -> str:
    results = [
        {"expectedOutcome": a, "reasoning": ".", "metExpectation": m} for a, m in zip(assertions, met, strict=True)
    ]
    return json.dumps({"results": results})


def test_no_task_of_the_pinned_release_counts_nl_assertions(tau2_envs) -> None:
    from tau2.data_model.tasks import RewardType

    listed = {}
    for domain in ("airline", "retail", "telecom"):
        env = tau2_envs(domain)
        criteria = [env.tau2_task(t).evaluation_criteria for t in env.tasks("base")]
        assert not any(c and RewardType.NL_ASSERTION in c.reward_basis for c in criteria), domain
        listed[domain] = sum(1 for c in criteria if c and c.nl_assertions)
    assert listed == {"airline": 50, "retail": 8, "telecom": 0}  # as docs/concepts/environments.md says


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch):
    """An airline env with a judge named, and a task with NL assertions that its reward basis counts."""
    from tau2.data_model.tasks import RewardType

    env = build_env("tau2-airline", "default", {"judge": "scripted:judge"})
    task = next(t for t in env.tasks("base") if t.goals and env.tau2_task(t).evaluation_criteria.nl_assertions)
    original = env.tau2_task(task)
    criteria = original.evaluation_criteria
    counted = criteria.model_copy(update={"reward_basis": [*criteria.reward_basis, RewardType.NL_ASSERTION]})
    counting = original.model_copy(update={"evaluation_criteria": counted})
    real = env.tau2_task
    monkeypatch.setattr(env, "tau2_task", lambda t: counting if t.id == task.id else real(t))
    return env, task, list(criteria.nl_assertions)


def gold_reward(env, task, answer) -> tuple[float, list[list[Message]]]:
    """The gold replay's reward with a scripted judge answering ``answer(assertions)``; the chats it was asked."""
    asked: list[list[Message]] = []

    def policy(messages, tools, index):
        asked.append(messages)
        if isinstance(answer, Exception):
            raise answer
        return answer

    attach_judge(env, ScriptedLLM(policy))
    return env.reward(*run_josh(env, task, gold_script(task), gold_closing(task))), asked


def test_the_judge_reads_tau2s_prompt_and_its_verdict_decides_the_reward(judged) -> None:
    env, task, assertions = judged
    reward, asked = gold_reward(env, task, verdicts(assertions, [True] * len(assertions)))
    assert reward == 1.0 and len(asked) == 1
    system, prompt = asked[0]
    assert system.role == "system" and "expected outcomes" in (system.content or "")
    assert "expectedOutcomes" in (prompt.content or "") and assertions[0] in (prompt.content or "")
    assert gold_closing(task) in (prompt.content or "")  # the conversation, as τ² writes it
    unmet, _ = gold_reward(env, task, verdicts(assertions, [True] * (len(assertions) - 1) + [False]))
    assert unmet == 0.0


@pytest.mark.parametrize("answer", ["not json at all", json.dumps({"results": [{"met": True}]}), LLMError("down")])
def test_a_failing_judge_is_a_zero_reward_not_a_crash(judged, answer) -> None:
    env, task, _ = judged
    reward, asked = gold_reward(env, task, answer)
    assert reward == 0.0 and len(asked) == 1


def test_without_a_judge_the_assertions_are_off_and_a_task_that_does_not_count_them_asks_no_judge(
    judged, tau2_envs
) -> None:
    env, task, _ = judged
    plain = tau2_envs("airline")
    assert plain.reward(*run_josh(plain, task, gold_script(task), gold_closing(task))) == 1.0
    assert plain.reward_notes == {"τ² NL assertions": "off"}
    other = next(t for t in env.tasks("base") if t.id != task.id and t.goals)
    reward, asked = gold_reward(env, other, "never read")
    assert reward == 1.0 and asked == []


def test_a_judge_named_but_never_attached_is_one_clear_error() -> None:
    env = build_env("tau2-retail", "default", {"judge": "scripted:judge"})
    task = env.tasks("base")[0]
    with pytest.raises(Tau2Error, match="never attached"):
        env.reward(*run_josh(env, task, gold_script(task), gold_closing(task)))


def test_the_python_api_builds_the_judge_with_the_options_it_names() -> None:
    """``josh.make_env`` honours ``judge_options`` as the command line does: the judge is built with them, attached."""
    env = josh.make_env("tau2-airline", judge="scripted:judge", judge_options={"replies": ["the assertion holds"]})
    assert (
        env.judge == "scripted:judge" and env.judge_call([Message(role="user", content="?")]) == "the assertion holds"
    )


def test_the_summary_says_whether_nl_assertions_are_judged(tmp_path: Path) -> None:
    from josh.cli.main import app

    off = CliRunner().invoke(app, [*BASE, "--limit", "1", "--out", str(tmp_path / "off")])
    assert off.exit_code == 0, off.output
    assert "τ² NL assertions" in off.output and "│ off" in off.output
    judge = ["--env-option", "judge=scripted:judge", "--backend", "scripted", "--model", "judge"]
    on = CliRunner().invoke(app, [*BASE, "--limit", "1", *judge, "--llm-option", 'replies=["{}"]', "--out",
                                  str(tmp_path / "on")])  # fmt: skip
    assert on.exit_code == 0, on.output
    assert "judged by scripted:judge" in on.output
    summary = json.loads((tmp_path / "on" / "summary.json").read_text())
    assert summary["reward_notes"] == {"τ² NL assertions": "judged by scripted:judge"}
    assert summary["run"]["env_options"] == {"judge": "scripted:judge"}


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--env-option", "judge=gpt4"], "bad option judge='gpt4' for the tau2-retail environment (--env-option)"),
        (["--env-option", "jduge=openai:x"], "unknown option jduge for the tau2-retail environment (--env-option)"),
        (["--env-option", "judge=scripted:j"], "the scripted backend needs canned replies"),
    ],
)
def test_a_bad_env_option_is_one_clear_line(tmp_path: Path, options: list[str], says: str) -> None:
    from josh.cli.main import app

    result = CliRunner().invoke(app, [*BASE, "--limit", "1", *options, "--out", str(tmp_path / "run")])
    assert result.exit_code != 0 and says in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run" / "results.jsonl").exists()
