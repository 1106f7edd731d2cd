"""One conversation between an agent and a user simulator inside an environment, without search."""

from __future__ import annotations

import time
import traceback
from typing import Literal

from pydantic import BaseModel, Field

from josh.agents.base import Agent
from josh.diagnostics import Diagnosis, diagnose_conversation
from josh.envs.base import ConversationState, Env
from josh.types import ErrorCategory, Message, Task, assistant, user
from josh.users.base import UserSimulator

EndReason = Literal["user_done", "max_turns", "terminated", "agent_error", "user_error"]


class ConversationRecord(BaseModel):
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
    calls: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    error: str | None = None
    diagnosis: Diagnosis | None = None


class _Tally:
    """Running LLM accounting over agent and user turns."""

    def __init__(self) -> None:
        self.llm_calls = self.prompt_tokens = self.completion_tokens = 0

    def add(self, turn: object) -> None:
        self.llm_calls += getattr(turn, "llm_calls", 0)
        self.prompt_tokens += getattr(turn, "prompt_tokens", 0)
        self.completion_tokens += getattr(turn, "completion_tokens", 0)


async def run_conversation(
    env: Env, task: Task, agent: Agent, user_sim: UserSimulator, *, max_turns: int = 15, trial: int = 0
) -> ConversationRecord:
    """Alternate user and agent turns until the user ends, the env terminates, or ``max_turns`` agent turns.

    Failures never escape: an agent or user exception ends the conversation with its traceback recorded, and the
    reward is scored on the state reached so far. A user simulator that fails (raises, or gives up with an
    ``error`` such as a failed LLM call) ends it as ``user_error`` with ``ErrorCategory.USER_ERROR``: the
    simulator's failure, kept apart from the agent's errors.
    """
    start = time.perf_counter()
    state: ConversationState = env.reset(task)
    history: list[Message] = []
    transcript: list[Message] = []
    errors: list[ErrorCategory] = []
    tally = _Tally()
    turns = 0
    error: str | None = None
    end: EndReason = "max_turns"
    while True:
        try:
            said = await user_sim.reply(task, transcript)
        except Exception:
            error, end = traceback.format_exc(limit=5), "user_error"
            errors.append(ErrorCategory.USER_ERROR)
            break
        tally.add(said)
        if said.error:
            error, end = f"user simulator: {said.error}", "user_error"
            errors.append(ErrorCategory.USER_ERROR)
            break
        if said.text:
            history.append(user(said.text))
            transcript.append(user(said.text))
        if said.done or turns >= max_turns:
            end = "user_done" if said.done else "max_turns"
            break
        try:
            turn = (await agent.turn(history, state, n=1))[0]
        except Exception:
            error, end = traceback.format_exc(limit=5), "agent_error"
            break
        turns += 1
        tally.add(turn)
        state = turn.state
        history.extend(turn.messages)
        errors.extend(turn.errors)
        if turn.reply is not None:
            transcript.append(assistant(turn.reply))
        if state.terminated:
            end = "terminated"
            break
    reward = env.reward(state, history)
    return ConversationRecord(
        task_id=task.id,
        trial=trial,
        reward=reward,
        goal_reward=state.goal_reward,
        success=abs(reward - 1.0) < 1e-6,
        n_goals=len(task.goals),
        completed_goals=sorted(state.completed),
        end_reason=end,
        turns=turns,
        messages=history,
        transcript=transcript,
        errors=errors,
        tool_errors=[r.error for r in state.log if r.error is not None],
        calls=len(state.log),
        llm_calls=tally.llm_calls,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        wall_s=time.perf_counter() - start,
        error=error,
        diagnosis=diagnose_conversation(
            env, task.goals, state.log, [m.content or "" for m in transcript if m.role == "assistant"]
        ),
    )
