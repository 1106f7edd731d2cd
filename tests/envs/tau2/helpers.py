"""Trajectories for the τ² tests: a josh conversation through ``Tau2Env``, and the same conversation built with τ²'s
own classes on a fresh τ² environment, scored by τ²'s evaluator without josh in between."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import Any

from josh.agents.replay import final_reply, gold_calls
from josh.envs.tau2 import Tau2Env
from josh.types import Message, Task, ToolCall, assistant, tool_result, user

Script = list[tuple[str, ToolCall]]  # (requestor, call), in order


def gold_script(task: Task) -> Script:
    """The task's gold calls, the assistant's first and then the user's (the order τ²'s gold replay uses)."""
    users = [
        ToolCall(name=a["name"], arguments=a["kwargs"], id=f"user_{i}")
        for i, a in enumerate(task.details["user_actions"])
    ]
    return [("assistant", c) for c in gold_calls(task)] + [("user", c) for c in users]


def run_josh(env: Tau2Env, task: Task, script: Script, closing: str | None) -> tuple[Any, list[Message]]:
    """Play ``script`` through josh's env; ``closing``: the assistant's last words (None: nothing said)."""
    state = env.reset(task)
    messages = [user("Hi, I need help.")]
    for side, call in script:
        if side == "user":
            env.user_call(state, call)
        else:
            result = env.call(state, call)
            messages += [assistant(calls=[call]), tool_result(call.id, result.content)]
    if closing is not None:
        messages.append(assistant(closing))
    return state, messages


def tau2_reward(env: Tau2Env, task: Task, script: Script, closing: str | None) -> float:
    """τ²'s evaluator on the same script, played on a fresh τ² environment built with τ²'s own classes."""
    from tau2.data_model.message import AssistantMessage, UserMessage
    from tau2.data_model.message import ToolCall as Tau2Call
    from tau2.data_model.simulation import SimulationRun, TerminationReason
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    tau2_task = env.tau2_task(task)
    environment = import_module(f"tau2.domains.{env.domain}.environment").get_environment()
    initial = tau2_task.initial_state
    if initial is not None:
        environment.set_state(
            initial.initialization_data, initial.initialization_actions, initial.message_history or []
        )
    trajectory: list[Any] = [UserMessage(role="user", content="Hi, I need help.")]
    for side, call in script:
        tc = Tau2Call(id=call.id, name=call.name, arguments=dict(call.arguments), requestor=side)
        caller = UserMessage if side == "user" else AssistantMessage
        trajectory += [caller(role=side, tool_calls=[tc]), environment.get_response(tc)]
    if closing is not None:
        trajectory.append(AssistantMessage(role="assistant", content=closing))
    run = SimulationRun(
        id="t",
        task_id=tau2_task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=TerminationReason.USER_STOP,
        messages=trajectory,
    )
    return evaluate_simulation(run, tau2_task, EvaluationType.ALL, False, env.domain).reward


def gold_closing(task: Task) -> str:
    return final_reply(task)


def sample(tasks: Sequence[Task], n: int) -> list[Task]:
    """``n`` tasks spread over the split (first, last and between), deterministic."""
    step = max(1, len(tasks) // n)
    return list(tasks[::step][:n])
