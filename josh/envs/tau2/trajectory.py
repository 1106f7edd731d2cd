"""A josh conversation as τ²'s trajectory, and τ²'s own evaluator on it (the final reward).

The trajectory keeps the spoken messages of ``messages`` in order and puts, at each assistant tool call, the τ²
``ToolCall`` and ``ToolMessage`` the state recorded for that call id (so the evaluator's replay sees exactly what
the environment returned). A call that never reached τ²'s environment (arguments that are not a JSON object) is
left out; recorded calls the messages do not name are appended in execution order. The run is scored as ended by
the user (``USER_STOP``); NL assertions are never evaluated (no task of the release counts them).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from tau2.data_model.message import AssistantMessage, UserMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.data_model.tasks import RewardType

from josh.types import Message


def to_trajectory(messages: Sequence[Message], calls: Sequence[tuple[str, Any, Any]]) -> list[Any]:
    """τ² messages for a josh conversation (see the module docstring)."""
    pending: dict[str, deque[tuple[Any, Any]]] = defaultdict(deque)
    for call_id, call, response in calls:
        pending[call_id].append((call, response))
    out: list[Any] = []

    def emit(call: Any, response: Any) -> None:
        caller = UserMessage(role="user", tool_calls=[call]) if call.requestor == "user" else None
        out.extend([caller or AssistantMessage(role="assistant", tool_calls=[call]), response])

    for message in messages:
        if message.role == "user" and message.content:
            out.append(UserMessage(role="user", content=message.content))
        elif message.role == "assistant":
            if message.content and message.content.strip():
                out.append(AssistantMessage(role="assistant", content=message.content))
            for call in message.tool_calls or ():
                if pending[call.id]:
                    emit(*pending[call.id].popleft())
    remaining = {id(call) for queue in pending.values() for call, _ in queue}
    for _, call, response in calls:
        if id(call) in remaining:
            emit(call, response)
    return out


def evaluate(domain: str, tau2_task: Any, trajectory: list[Any]) -> Any:
    """τ²'s ``evaluate_simulation(..., EvaluationType.ALL)`` on ``trajectory``: its ``RewardInfo``."""
    # deferred: tau2's evaluator imports litellm (~5 s); only scoring a conversation needs it
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    now = datetime.now(timezone.utc).isoformat()
    run = SimulationRun(
        id=f"josh-{tau2_task.id}",
        task_id=tau2_task.id,
        start_time=now,
        end_time=now,
        duration=0.0,
        termination_reason=TerminationReason.USER_STOP,
        messages=trajectory,
    )
    return evaluate_simulation(run, without_nl_assertions(tau2_task), EvaluationType.ALL, False, domain)


def without_nl_assertions(tau2_task: Any) -> Any:
    """The task with NL assertions out of its reward basis (they need an LLM judge), else the task itself."""
    criteria = tau2_task.evaluation_criteria
    if criteria is None or RewardType.NL_ASSERTION not in criteria.reward_basis:
        return tau2_task
    basis = [kind for kind in criteria.reward_basis if kind != RewardType.NL_ASSERTION]
    return tau2_task.model_copy(update={"evaluation_criteria": criteria.model_copy(update={"reward_basis": basis})})
