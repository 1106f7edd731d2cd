"""One conversation between an agent and a user simulator inside an environment, without search."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from josh.core.agent import Agent, AgentTurn
from josh.core.env import ConversationState, Env
from josh.core.llm import Spent, failures_noted
from josh.core.user import UserSimulator, UserTurn
from josh.run.diagnostics import Diagnosis, diagnose_conversation
from josh.run.env_judge import judge_overflows
from josh.run.step import CONTEXT_LENGTH, JUDGE_CONTEXT_LENGTH, USER_CONTEXT_LENGTH, agent_step, spoken
from josh.run.user_turn import MAX_USER_STEPS, user_turn
from josh.types import ErrorCategory, Message, Task, is_success, user

EndReason = Literal[
    "user_done",
    "max_turns",
    "terminated",
    "agent_error",
    "user_error",
    "context_length",
    "user_context_length",
    "judge_context_length",
]


class ConversationRecord(Spent):
    """Everything one finished conversation produced; one line of ``results.jsonl``."""

    task_id: str
    trial: int = 0
    reward: float
    goal_reward: float
    success: bool
    n_goals: int
    completed_goals: list[int] = Field(default_factory=list)
    end_reason: EndReason
    turns: int = 0
    messages: list[Message] = Field(default_factory=list)
    transcript: list[Message] = Field(default_factory=list)
    errors: list[ErrorCategory] = Field(default_factory=list)
    tool_errors: list[ErrorCategory] = Field(default_factory=list)
    user_tool_errors: list[ErrorCategory] = Field(default_factory=list)
    calls: int = 0
    wall_s: float = 0.0
    error: str | None = None
    failed: str | None = Field(
        None, description="an LLM request failed after its retries (``llm_error: ...``): no result, redone on rerun"
    )
    diagnosis: Diagnosis | None = None


class _Tally:
    """Running LLM accounting over agent and user turns."""

    def __init__(self) -> None:
        self.llm_calls = self.prompt_tokens = self.completion_tokens = 0

    def add(self, turn: AgentTurn | UserTurn) -> None:
        self.llm_calls += turn.llm_calls
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens


async def run_conversation(
    env: Env,
    task: Task,
    agent: Agent,
    user_sim: UserSimulator,
    *,
    max_turns: int = 15,
    trial: int = 0,
    max_user_steps: int = MAX_USER_STEPS,
) -> ConversationRecord:
    """Alternate user and agent turns until the user ends, the env terminates, or ``max_turns`` agent turns.

    Failures never escape (``josh.run.step``): a failing agent ends the conversation as ``agent_error``, a failing user
    simulator as ``user_error`` with ``ErrorCategory.USER_ERROR``, and the reward is scored on the state reached so
    far. A user turn may take several steps (``josh.run.user_turn``): calls the user makes on their own side run on
    the state, at most ``max_user_steps`` steps of them per turn, and stay in the transcript, never in the agent's
    history; the categories of the user's bad calls are ``user_tool_errors``. A prompt that outgrew its model's
    context ends the conversation as ``context_length`` (the agent's), ``user_context_length`` (the user
    simulator's) or ``judge_context_length`` (the environment judge's, while scoring), the line in ``error``: a result,
    scored like any other ending. A state with an ``ended`` attribute is told the end reason before the reward. A conversation in which any LLM request failed after its backend's
    retries (agent, user or an environment's judge) is ``failed`` (``josh.llm.health``): kept, never a result.
    """
    with failures_noted() as noted:
        record = await _converse(env, task, agent, user_sim, max_turns, trial, max_user_steps)
    if noted or ErrorCategory.LLM_ERROR in record.errors:
        record.failed = f"llm_error: {noted[-1] if noted else record.error or 'the agent LLM request failed'}"
    return record


async def _converse(
    env: Env, task: Task, agent: Agent, user_sim: UserSimulator, max_turns: int, trial: int, max_user_steps: int
) -> ConversationRecord:
    start = time.perf_counter()
    state: ConversationState = env.reset(task)
    history: list[Message] = []
    transcript: list[Message] = []
    errors: list[ErrorCategory] = []
    user_tool_errors: list[ErrorCategory] = []
    tally = _Tally()
    turns = 0
    error: str | None = None
    end: EndReason = "max_turns"
    while True:
        answer = await user_turn(env, state, user_sim, task, transcript, max_steps=max_user_steps)
        tally.add(answer.said)
        errors.extend(answer.errors)
        user_tool_errors.extend(answer.tool_errors)
        transcript.extend(answer.messages)
        if answer.failure:
            error, end = answer.failure, "user_error"
            break
        if answer.overflow:
            error, end = answer.overflow, USER_CONTEXT_LENGTH
            break
        if answer.said.text:
            history.append(user(answer.said.text))
        if answer.said.done or turns >= max_turns:
            end = "user_done" if answer.said.done else "max_turns"
            break
        step = await agent_step(agent, history, state)
        if step.overflow:
            error, end = step.overflow, CONTEXT_LENGTH
            break
        if step.failure:
            error, end = step.failure, "agent_error"
            errors.extend(step.errors)
            break
        turn = step.turns[0]
        turns += 1
        tally.add(turn)
        state = turn.state
        history.extend(turn.messages)
        errors.extend(turn.errors)
        transcript.extend(spoken(turn))
        if ErrorCategory.LLM_ERROR in turn.errors:  # a failed conversation: asking a failing backend on is no use
            error, end = "the agent's LLM request failed", "agent_error"
            break
        if turn.overflow:
            error, end = f"agent: {turn.overflow}", CONTEXT_LENGTH
            break
        if state.terminated:
            end = "terminated"
            break
    state.ended = end  # environments may score how a conversation ended (τ²: cut short scores 0.0)
    with judge_overflows() as overflowed:
        reward = env.reward(state, history)
    if overflowed:  # the environment's judge could not read the conversation: it scored what it could
        error, end = f"judge: {overflowed[-1]}", JUDGE_CONTEXT_LENGTH
    return ConversationRecord(
        task_id=task.id,
        trial=trial,
        reward=reward,
        goal_reward=state.goal_reward,
        success=is_success(reward),
        n_goals=len(task.goals),
        completed_goals=sorted(state.completed),
        end_reason=end,
        turns=turns,
        messages=history,
        transcript=transcript,
        errors=errors,
        tool_errors=[r.error for r in state.log if r.error is not None],
        user_tool_errors=user_tool_errors,
        calls=len(state.log),
        llm_calls=tally.llm_calls,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        wall_s=time.perf_counter() - start,
        error=error,
        diagnosis=diagnose_conversation(
            env, task, state.log, [m.content or "" for m in transcript if m.role == "assistant"]
        ),
    )
