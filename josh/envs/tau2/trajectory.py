"""A josh conversation as τ²'s trajectory, and τ²'s own evaluator on it (the final reward).

The trajectory keeps the spoken messages of ``messages`` in order and puts, at each assistant tool call, the τ²
``ToolCall`` and ``ToolMessage`` the state recorded for that call id (so the evaluator's replay sees exactly what
the environment returned). The user's own calls (telecom's device, requestor ``user``), which the agent's messages
never hold, go before the user message they were made with: the user calls executed before the next assistant call
go before the last user message ahead of that call (a user turn's device calls come right before its words). A call
that never reached τ²'s environment (arguments that are not a JSON object) is left out; recorded calls the messages
do not name are appended in execution order.

How the conversation ended decides whether τ² scores it at all (``TERMINATION``): the user's stop and the agent's
transfer are scored, a conversation cut off at ``max_turns`` or by a failing agent or user simulator gets τ²'s 0.0.
NL assertions are evaluated only with a judge, on tasks whose reward basis counts them (``josh.envs.tau2.assertions``;
no task of the release does); without one they are left out of the basis.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from tau2.data_model.message import AssistantMessage, UserMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.data_model.tasks import RewardType

from josh.envs.tau2.assertions import JudgeCall, counts_nl_assertions, evaluate_judged
from josh.envs.tau2.fresh import evaluation_domain
from josh.types import Message

TERMINATION = {
    "user_done": TerminationReason.USER_STOP,
    "terminated": TerminationReason.AGENT_STOP,
    "max_turns": TerminationReason.MAX_STEPS,
    "agent_error": TerminationReason.AGENT_ERROR,
    "user_error": TerminationReason.USER_ERROR,
    "context_length": TerminationReason.AGENT_ERROR,
    "user_context_length": TerminationReason.USER_ERROR,
    "judge_context_length": TerminationReason.USER_STOP,
}
"""josh's end reasons (``josh.run.conversation.EndReason``) as τ²'s termination reasons: a prompt that outgrew the
agent's or the user's context is that side's error (τ² scores it 0.0, a run cut short); τ² asks its judge only about
conversations the user or agent ended, so one whose judge prompt overflowed was ended by the user."""


def call_messages(call: Any, response: Any) -> list[Any]:
    """One executed τ² call as the trajectory holds it: the caller's message with the call, then τ²'s answer."""
    caller = UserMessage if call.requestor == "user" else AssistantMessage
    return [caller(role=call.requestor, tool_calls=[call]), response]


def to_trajectory(messages: Sequence[Message], calls: Sequence[tuple[str, Any, Any]]) -> list[Any]:
    """τ² messages for a josh conversation (see the module docstring)."""
    pending: dict[str, deque[int]] = defaultdict(deque)
    for index, (call_id, call, _) in enumerate(calls):
        if call.requestor != "user":
            pending[call_id].append(index)
    placed: list[tuple[str, Message | int]] = []  # the messages in order, an assistant call as its index in calls
    for message in messages:
        if message.role == "user" and message.content:
            placed.append(("user", message))
        elif message.role == "assistant":
            if message.content and message.content.strip():
                placed.append(("assistant", message))
            placed.extend(("call", pending[c.id].popleft()) for c in message.tool_calls or () if pending[c.id])
    user_calls = deque(i for i, (_, call, _) in enumerate(calls) if call.requestor == "user")
    emitted: set[int] = set()
    out: list[Any] = []

    def emit(index: int) -> None:
        out.extend(call_messages(*calls[index][1:]))
        emitted.add(index)

    for position, (kind, item) in enumerate(placed):
        if isinstance(item, int):
            emit(item)
        elif kind == "user":
            rest = placed[position + 1 :]
            stop = next((k for k, (_, i) in enumerate(rest) if isinstance(i, int)), len(rest))
            if not any(later == "user" for later, _ in rest[:stop]):
                bound = rest[stop][1] if stop < len(rest) else len(calls)
                while user_calls and user_calls[0] < bound:
                    emit(user_calls.popleft())
            out.append(UserMessage(role="user", content=item.content))
        else:
            out.append(AssistantMessage(role="assistant", content=item.content))
    for index in range(len(calls)):
        if index not in emitted:
            emit(index)
    return out


def simulation(tau2_task: Any, trajectory: list[Any], ended: str | None = None) -> SimulationRun:
    """``trajectory`` as τ²'s ``SimulationRun`` of ``tau2_task``, ended as josh's ``ended`` says (``None``: by the
    user)."""
    now = datetime.now(timezone.utc).isoformat()
    return SimulationRun(
        id=f"josh-{tau2_task.id}",
        task_id=tau2_task.id,
        start_time=now,
        end_time=now,
        duration=0.0,
        termination_reason=TERMINATION[ended or "user_done"],
        messages=trajectory,
    )


def evaluate(
    domain: str, tau2_task: Any, trajectory: list[Any], ended: str | None = None, judge: JudgeCall | None = None
) -> Any:
    """τ²'s ``evaluate_simulation(..., EvaluationType.ALL)`` on ``trajectory`` ended as josh's ``ended`` says (``None``:
    by the user): its ``RewardInfo``; with ``judge``, ``ALL_WITH_NL_ASSERTIONS`` on a task that counts them."""
    # deferred: tau2's evaluator imports litellm (~5 s); only scoring a conversation needs it
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # optional: the tau2 extra

    run = simulation(tau2_task, trajectory, ended)
    fresh = evaluation_domain(domain)  # τ²'s constructor over one pristine load (josh.envs.tau2.fresh)
    if judge is not None and counts_nl_assertions(tau2_task):
        return evaluate_judged(run, tau2_task, fresh, judge)
    return evaluate_simulation(run, without_nl_assertions(tau2_task), EvaluationType.ALL, False, fresh)


def without_nl_assertions(tau2_task: Any) -> Any:
    """The task with NL assertions out of its reward basis (they need an LLM judge), else the task itself."""
    criteria = tau2_task.evaluation_criteria
    if criteria is None or RewardType.NL_ASSERTION not in criteria.reward_basis:
        return tau2_task
    basis = [kind for kind in criteria.reward_basis if kind != RewardType.NL_ASSERTION]
    return tau2_task.model_copy(update={"evaluation_criteria": criteria.model_copy(update={"reward_basis": basis})})
