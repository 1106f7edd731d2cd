"""A finished ``josh eval`` run on a τ² environment as τ²'s own ``Results`` (``tau2.data_model.simulation``).

Nothing is invented: each conversation record is replayed through τ²'s environment (``Tau2Env``) in the order its
calls ran, every answer is checked against the one the record kept, and τ²'s evaluator scores the rebuilt
trajectory, which must give the reward the run recorded. The record keeps the agent's calls in ``messages`` and the
user's own calls (telecom's device) in ``transcript``; where a user's calls ran among the agent's is read from the
words the user said after them in that turn (both lists hold the user's words), or from the agent's reply before
them; where the record says neither, the export stops rather than guess.

What josh does not record is said, not guessed: ``start_time`` and ``end_time`` are the run's start (josh keeps each
conversation's ``duration``, not its clock times), message timestamps are left empty, a cost is 0.0 for a side
without an LLM and unknown (``None``) otherwise, ``max_steps`` holds josh's ``max_turns`` (agent turns, not τ²
steps) and ``max_errors`` is -1 (josh never stops a conversation on tool errors).
"""

from __future__ import annotations

import inspect
import shlex
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tau2.data_model.message import AssistantMessage, UserMessage
from tau2.data_model.simulation import AgentInfo, Info, Results, SimulationRun, UserInfo
from tau2.environment.environment import EnvironmentInfo

from josh.envs.tau2 import RELEASE, Tau2Env, Tau2State
from josh.envs.tau2.trajectory import TERMINATION, call_messages, evaluate
from josh.eval.evaluate import evaluate as run_evaluation
from josh.eval.evaluate import load_finished
from josh.eval.metrics import Summary
from josh.run.conversation import ConversationRecord
from josh.run.info import RunInfo
from josh.run.user_turn import run_user_calls
from josh.types import Message, ToolCall, tool_result
from josh.util.jsonl import brief
from josh.util.layout import RESULTS, SUMMARY
from josh.version import __version__

TAU2_ENVS = ("tau2-airline", "tau2-retail", "tau2-telecom")
NO_ERROR_LIMIT = -1
Step = tuple[str, ToolCall, str | None]  # (requestor, call, the result the record kept)


class ExportError(ValueError):
    """A run that cannot be exported to τ²'s format, in one line."""


@dataclass
class Tau2Run:
    """A finished ``josh eval`` folder on a τ² environment: its summary and its records, one per (task, trial)."""

    path: Path
    domain: str
    summary: Summary
    info: RunInfo
    records: list[ConversationRecord]


def read_run(run_dir: str | Path) -> Tau2Run:
    """The finished τ² evaluation in ``run_dir``, or ``ExportError`` saying why it cannot be exported."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ExportError(f"{path} is not a folder: pass a `josh eval` run folder")
    if not (path / RESULTS).is_file():
        raise ExportError(f"{path} is not a `josh eval` run folder: it has no {RESULTS}")
    if not (path / SUMMARY).is_file():
        raise ExportError(f"{path} is an unfinished run (no {SUMMARY}): rerun its `josh eval` command to finish it")
    try:
        summary = Summary.model_validate_json((path / SUMMARY).read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ExportError(f"{path / SUMMARY} is not a josh evaluation summary: {brief(exc)}") from None
    env = summary.run.env if summary.run is not None else None
    if summary.run is None or env not in TAU2_ENVS:
        raise ExportError(
            f"{path} is an evaluation on {env or 'an unrecorded environment'}, not on a τ² environment "
            f"({', '.join(TAU2_ENVS)}): only τ² runs export to τ²'s format"
        )
    records = load_finished(path)
    if not records:
        raise ExportError(f"{path} holds no finished conversation: rerun its `josh eval` command")
    trials = Counter(r.task_id for r in records)
    short = [task for task, n in trials.items() if n != summary.trials]
    if short or len(records) != summary.conversations:
        raise ExportError(
            f"{path} is an unfinished run ({len(records)} conversations, {len(short)} tasks with fewer than "
            f"{summary.trials} trials): rerun its `josh eval` command to finish it"
        )
    return Tau2Run(path=path, domain=env.removeprefix("tau2-"), summary=summary, info=summary.run, records=records)


def _results_by_id(messages: list[Message]) -> dict[str, deque[str | None]]:
    found: dict[str, deque[str | None]] = defaultdict(deque)
    for message in messages:
        if message.role == "tool" and message.tool_call_id is not None:
            found[message.tool_call_id].append(message.content)
    return found


def _said(message: Message, role: str) -> bool:
    return message.role == role and not message.tool_calls and bool(message.content)


@dataclass
class Plan:
    """A record's calls: the agent's in order (``agent[i]``: the ``i``-th call in ``messages``) and the user's in
    blocks keyed by the index of the ``messages`` entry they ran before (``len(messages)``: after the last)."""

    agent: list[Step]
    user: dict[int, list[Step]]
    calls_before: list[int]  # calls_before[i]: the agent's calls in messages[:i]

    def order(self) -> list[Step]:
        """Every call in the order it ran."""
        ordered: list[Step] = []
        for count in range(len(self.agent) + 1):
            ordered.extend(s for at, steps in self.user.items() if self.calls_before[at] == count for s in steps)
            if count < len(self.agent):
                ordered.append(self.agent[count])
        return ordered


def plan(record: ConversationRecord) -> Plan:
    """Where every call of the conversation ran (see the module docstring); ``ExportError`` when the record does not
    say where a user's calls ran among the agent's."""
    history, transcript = record.messages, record.transcript
    agent_results, user_results = _results_by_id(history), _results_by_id(transcript)
    agent: list[Step] = []
    calls_before: list[int] = []
    for message in history:
        calls_before.append(len(agent))
        if message.role == "assistant":
            for call in message.tool_calls or ():
                kept = agent_results[call.id].popleft() if agent_results[call.id] else None
                agent.append(("assistant", call, kept))
    calls_before.append(len(agent))
    user: dict[int, list[Step]] = defaultdict(list)
    position, synced = 0, True
    for index, message in enumerate(transcript):
        if message.role == "user" and message.tool_calls:
            after = next((m for m in transcript[index + 1 :] if m.role != "tool" and not m.tool_calls), None)
            if after is not None and _said(after, "user"):
                at = _find(history, position, after)
            elif after is None:
                at = len(history)
            elif synced:
                at = position
            else:
                raise ExportError(
                    f"{record.task_id} trial {record.trial}: the record does not say where the user's calls "
                    f"{', '.join(c.name for c in message.tool_calls)} ran among the agent's"
                )
            for call in message.tool_calls:
                kept = user_results[call.id].popleft() if user_results[call.id] else None
                user[at].append(("user", call, kept))
        elif _said(message, "user"):
            position, synced = _find(history, position, message) + 1, True
        elif _said(message, "assistant"):
            found = _find(history, position, message, missing_ok=True)
            position, synced = (found + 1, True) if found is not None else (position, False)
    return Plan(agent=agent, user=dict(user), calls_before=calls_before)


def _find(history: list[Message], start: int, said: Message, *, missing_ok: bool = False) -> Any:
    """The index of the first message of ``history`` from ``start`` that says what ``said`` says."""
    for index in range(start, len(history)):
        if _said(history[index], said.role) and history[index].content == said.content:
            return index
    if missing_ok:
        return None
    raise ExportError(f"the record's transcript and messages disagree: {said.role} said {said.content!r}")


def replay(env: Tau2Env, record: ConversationRecord, calls: Plan) -> dict[int, tuple[Any, Any]]:
    """The record's calls run again on τ²'s environment in the order they ran, each answer checked against the
    recorded one: τ²'s (``ToolCall``, ``ToolMessage``) by ``id()`` of the step (calls τ² never saw are left out)."""
    state = env.reset(env.task(record.task_id))
    made: dict[int, tuple[Any, Any]] = {}
    for number, step in enumerate(calls.order(), start=1):
        side, call, kept = step
        before = len(state.calls)
        content = _answer(env, state, side, call)
        if kept is None or tool_result(call.id, content).content != kept:
            raise ExportError(
                f"{record.task_id} trial {record.trial}: call {number} ({call.name}) "
                + ("has no result in the record" if kept is None else "gets another answer from τ² than recorded")
                + ": the conversation cannot be exported as it happened"
            )
        if len(state.calls) > before:
            made[id(step)] = state.calls[-1][1:]
    return made


def _answer(env: Tau2Env, state: Tau2State, side: str, call: ToolCall) -> str | None:
    """What the call gets, run as the conversation ran it (the user's through the runner's ``run_user_calls``)."""
    if side != "user":
        return env.call(state, call).content
    made = run_user_calls(env, state, [call])
    return made if isinstance(made, str) else made[0][1].content


def trajectory(record: ConversationRecord, calls: Plan, made: dict[int, tuple[Any, Any]]) -> list[Any]:
    """τ²'s messages for the conversation, each call where it ran: a user's calls before the words they came with,
    the agent's in its turns (spoken words first, then each call and its answer, as ``to_trajectory`` writes them)."""
    out: list[Any] = []

    def emit(step: Step) -> None:
        if id(step) in made:
            out.extend(call_messages(*made[id(step)]))

    agent = iter(calls.agent)
    for index, message in enumerate([*record.messages, None]):
        for step in calls.user.get(index, ()):
            emit(step)
        if message is None or message.role == "tool":
            continue
        if message.role == "user" and message.content:
            out.append(UserMessage(role="user", content=message.content))
        if message.role == "assistant":
            if message.content and message.content.strip():
                out.append(AssistantMessage(role="assistant", content=message.content))
            for _ in message.tool_calls or ():
                emit(next(agent))
    return [m.model_copy(update={"timestamp": None}) for m in out]


def simulation(env: Tau2Env, record: ConversationRecord, info: RunInfo) -> SimulationRun:
    """One record as τ²'s ``SimulationRun``: the rebuilt trajectory, τ²'s ``RewardInfo`` on it, ending, trial, costs."""
    calls = plan(record)
    messages = trajectory(record, calls, replay(env, record, calls))
    tau2_task = env.tau2_task(env.task(record.task_id))
    reward_info = evaluate(env.domain, tau2_task, messages, record.end_reason)
    if abs(reward_info.reward - record.reward) > 1e-9:
        raise ExportError(
            f"{record.task_id} trial {record.trial}: τ²'s evaluator gives {reward_info.reward}, "
            f"the run recorded {record.reward}"
        )
    started = datetime.fromisoformat(info.started)
    return SimulationRun(
        id=f"{record.task_id}-trial-{record.trial}",
        task_id=tau2_task.id,
        timestamp=started.strftime("%Y%m%d_%H%M%S"),
        start_time=info.started,
        end_time=info.started,
        duration=record.wall_s,
        termination_reason=TERMINATION[record.end_reason],
        agent_cost=0.0 if info.backend is None else None,
        user_cost=0.0 if info.user_backend is None else None,
        reward_info=reward_info,
        messages=messages,
        trial=record.trial,
    )


def max_turns(info: RunInfo) -> int:
    """josh's ``max_turns`` for the run: ``--max-turns`` of its recorded command, else the evaluation's default."""
    words = shlex.split(info.command or "")
    for index, word in enumerate(words):
        value = word.removeprefix("--max-turns=") if word.startswith("--max-turns=") else None
        if word == "--max-turns" and index + 1 < len(words):
            value = words[index + 1]
        if value is not None and value.isdigit():
            return int(value)
    return int(inspect.signature(run_evaluation).parameters["max_turns"].default)


def user_note(info: RunInfo) -> str:
    """Who simulated the user, said plainly: always josh's simulator, never τ²'s LLM user."""
    how = f"prompting {info.user_model} ({info.user_backend})" if info.user_model else "rule-based, no LLM"
    return (
        f"josh's `{info.user}` user simulator ({how}), not τ²'s LLM user simulator; "
        f"tasks: {RELEASE}; rewards: τ²'s evaluator, NL assertions not evaluated"
    )


def run_info(run: Tau2Run, env: Tau2Env) -> Info:
    """τ²'s ``Info`` for the run: josh's agent and user by name, the models behind them, the domain."""
    info = run.info
    agent_args = {key: value for key, value in (("backend", info.backend), ("adapter", info.adapter)) if value}
    return Info(
        git_commit=info.git_commit or "unknown",
        num_trials=run.summary.trials,
        max_steps=max_turns(info),
        max_errors=NO_ERROR_LIMIT,
        user_info=UserInfo(
            implementation=f"josh:{info.user}",
            llm=info.user_model,
            llm_args={"backend": info.user_backend} if info.user_backend else None,
            global_simulation_guidelines=user_note(info),
        ),
        agent_info=AgentInfo(
            implementation=f"josh:{info.agent} (josh {__version__})", llm=info.model, llm_args=agent_args or None
        ),
        environment_info=EnvironmentInfo(domain_name=env.domain, policy=env.policy),
    )


def to_results(run: Tau2Run, env: Tau2Env | None = None) -> Results:
    """The run as τ²'s ``Results``: its info, the τ² tasks it ran (as the package ships them), one simulation per
    conversation and trial in (task, trial) order."""
    env = env or Tau2Env(run.domain)
    order = {task.id: index for index, task in enumerate(env.tasks(run.info.split or "base"))}
    records = sorted(run.records, key=lambda r: (order.get(r.task_id, len(order)), r.task_id, r.trial))
    simulations = [simulation(env, record, run.info) for record in records]
    tasks = {record.task_id: env.tau2_task(env.task(record.task_id)) for record in records}
    return Results(
        timestamp=datetime.fromisoformat(run.info.started).strftime("%Y%m%d_%H%M%S"),
        info=run_info(run, env),
        tasks=list(tasks.values()),
        simulations=simulations,
    )
