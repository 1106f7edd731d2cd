"""The user's whole turn, shared by evaluation and search: several steps when the user acts on its own device.

Like τ²'s user simulator, a user may answer with tool calls and no text (τ² telecom's device tools). The runner
runs them through the environment's ``user_call`` (requestor ``user``), puts the calls and their results into the
transcript on the user's side (a ``user`` message holding the calls, then a ``tool`` result per call; never in the
agent's history) and asks the user again, until it says something, ends the conversation or fails. A reply with
both calls and text (``tau2_scripted``) runs its calls and ends the turn with the text. The runner names the user's
calls by where they stand in the transcript (``josh.types.call_id``, side ``user``), so reruns write the same ids.

Failures are data: a bad call (unknown tool, one of the agent's tools, arguments that are not a JSON object) is
answered with the environment's error (an environment that raises answers with a tool error), which the user sees
at its next step, and its category is kept in ``tool_errors``; the turn goes on. Calls where the environment has no
user tools, or calls on more than ``max_steps`` steps of one turn, fail the turn as a ``user_error``
(``ErrorCategory.USER_ERROR``); the calls made until then stay in ``messages``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from josh.core.env import ConversationState, Env
from josh.core.user import UserSimulator, UserTurn
from josh.run.step import user_step
from josh.types import ErrorCategory, Message, Task, ToolCall, ToolResult, call_id, tool_result, user

MAX_USER_STEPS = 10
"""The default bound on the steps of one user turn that make tool calls."""


@dataclass
class UserAnswer:
    """One user turn: the last reply (``said``, with the LLM accounting of every step), what the turn adds to the
    transcript (``messages``: the user's calls and results, then its text), why it failed (``failure``), the
    categories of its bad calls (``tool_errors``) and, when the user's prompt outgrew its model's context, that
    ending's line (``overflow``)."""

    said: UserTurn
    messages: list[Message] = field(default_factory=list)
    failure: str | None = None
    tool_errors: list[ErrorCategory] = field(default_factory=list)
    overflow: str | None = None

    @property
    def errors(self) -> list[ErrorCategory]:
        return [ErrorCategory.USER_ERROR] if self.failure else []

    @property
    def calls(self) -> list[Message]:
        """The user's tool traffic of this turn: its call messages and their results, without its text."""
        return [m for m in self.messages if m.tool_calls or m.role == "tool"]


def run_user_calls(
    env: Env, state: ConversationState, calls: list[ToolCall]
) -> tuple[list[Message], list[ErrorCategory]] | str:
    """The user's calls run on ``state`` through the env's ``user_call``, as the transcript keeps them (a ``user``
    message holding the calls, then their results) with the categories of the bad ones; a one-line failure when
    the env has no user tools."""
    if not env.user_tools:
        return f"user simulator: {env.name} has no user tools, but the user called {calls[0].name}"
    results = [_nameless(call) if not call.name else _run(env.user_call, state, call) for call in calls]
    messages = [Message(role="user", tool_calls=tuple(calls))]
    messages += [tool_result(call.id, result.content) for call, result in zip(calls, results, strict=True)]
    return messages, [result.error for result in results if result.error is not None]


def _run(
    run: Callable[[ConversationState, ToolCall], ToolResult], state: ConversationState, call: ToolCall
) -> ToolResult:
    try:
        return run(state, call)
    except Exception as exc:  # an environment bug on a user call is that call's tool error, never the run's
        return ToolResult(content=f"Error: {type(exc).__name__}: {exc}", error=ErrorCategory.TOOL_ERROR)


def _nameless(call: ToolCall) -> ToolResult:
    return ToolResult(content=f"Error: the tool call has no tool name: {call.arguments}", error=ErrorCategory.MALFORMED)


class _ServerUser:
    """The user inside the environment, as a user simulator: the state asks the server (``user_says``)."""

    def __init__(self, state: ConversationState) -> None:
        self.state = state

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        text, done = await self.state.user_says_async(transcript)
        return UserTurn(text=text, done=done)


def _with_spent(turn: UserTurn, steps: list[UserTurn]) -> UserTurn:
    return turn.model_copy(
        update={
            "llm_calls": sum(s.llm_calls for s in steps),
            "prompt_tokens": sum(s.prompt_tokens for s in steps),
            "completion_tokens": sum(s.completion_tokens for s in steps),
        }
    )


async def user_turn(
    env: Env,
    state: ConversationState,
    user_sim: UserSimulator,
    task: Task,
    transcript: list[Message],
    *,
    max_steps: int = MAX_USER_STEPS,
) -> UserAnswer:
    """Ask the user to answer ``transcript``, running its own calls on ``state`` step by step (see the module
    docstring); never raises for a failing simulator or a bad call. A state whose environment holds the user (an
    OpenEnv server: ``josh.envs.openenv``) answers for it instead of ``user_sim``."""
    if state.holds_user:
        user_sim = _ServerUser(state)
    added: list[Message] = []
    steps: list[UserTurn] = []
    tool_errors: list[ErrorCategory] = []
    while True:
        answer = await user_step(user_sim, task, [*transcript, *added])
        steps.append(answer.said)
        said = _with_spent(answer.said, steps)
        if answer.failure:
            return UserAnswer(said, added, answer.failure, tool_errors)
        if answer.overflow:
            return UserAnswer(said, added, None, tool_errors, answer.overflow)
        if said.tool_calls:
            calling = sum(1 for s in steps if s.tool_calls)
            if calling > max_steps:
                failure = (
                    f"user simulator: still making tool calls after {max_steps} steps of one turn without a word "
                    "to the agent (the bound on user tool steps)"
                )
                return UserAnswer(said, added, failure, tool_errors)
            at = len(transcript) + len(added)  # the calls' ids come from where they stand in the transcript
            calls = [c.model_copy(update={"id": call_id(at, k, side="user")}) for k, c in enumerate(said.tool_calls)]
            made = run_user_calls(env, state, calls)
            if isinstance(made, str):
                return UserAnswer(said, added, made, tool_errors)
            added.extend(made[0])
            tool_errors.extend(made[1])
            if not said.text and not said.done:
                continue
        if said.text:
            added.append(user(said.text))
        return UserAnswer(said, added, None, tool_errors)
