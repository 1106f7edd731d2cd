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


def tau2_reward(
    env: Tau2Env, task: Task, script: Script, closing: str | None, answered: Sequence[Any] | None = None
) -> float:
    """τ²'s evaluator on the same script, played on a fresh τ² environment built with τ²'s own classes; or, given
    ``answered`` (josh's ``state.calls`` for the script), with josh's tool messages in the trajectory: τ²'s evaluator
    replays every call on its own fresh environment and raises where a message differs from τ²'s answer (a τ² load
    fewer per trajectory)."""
    from tau2.data_model.message import AssistantMessage, UserMessage
    from tau2.data_model.message import ToolCall as Tau2Call
    from tau2.data_model.simulation import SimulationRun, TerminationReason
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    tau2_task = env.tau2_task(task)
    if answered is None:
        environment = import_module(f"tau2.domains.{env.domain}.environment").get_environment()
        initial = tau2_task.initial_state
        if initial is not None:
            environment.set_state(
                initial.initialization_data, initial.initialization_actions, initial.message_history or []
            )
    else:
        assert [(tc.name, tc.requestor) for _, tc, _ in answered] == [(c.name, side) for side, c in script]
    trajectory: list[Any] = [UserMessage(role="user", content="Hi, I need help.")]
    for index, (side, call) in enumerate(script):
        tc = Tau2Call(id=call.id, name=call.name, arguments=dict(call.arguments), requestor=side)
        caller = UserMessage if side == "user" else AssistantMessage
        response = environment.get_response(tc) if answered is None else answered[index][2]
        trajectory += [caller(role=side, tool_calls=[tc]), response]
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
