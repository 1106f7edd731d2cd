"""One step of a conversation, the same for evaluation (``josh.run.conversation``) and search (``josh.search.algorithm``): the
agent takes its turn(s), the user simulator answers, and a failure on either side is data, never an exception.

The agreed handling of failures: an agent that raises (or returns no turn) fails that turn, with
``ErrorCategory.LLM_ERROR`` when its backend failed; a user simulator that raises, or gives up with an ``error``
(e.g. its LLM failed after its retries), fails with ``ErrorCategory.USER_ERROR``: the simulator's failure, kept
apart from the agent's errors. Either failure is one line (``"user simulator: ..."`` for the user) and ends the
conversation, or the search branch, where it happened.

A prompt longer than the model's context (``ContextLengthError``) is no failure but the conversation's own ending:
``overflow`` holds its one line, and the conversation or branch ends with ``CONTEXT_LENGTH`` when the agent's prompt
overflowed, ``USER_CONTEXT_LENGTH`` when the user simulator's did (``JUDGE_CONTEXT_LENGTH``, the environment judge's,
is noted by ``josh.run.env_judge``); it is scored on the state reached, like any other ending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from josh.core.agent import Agent, AgentTurn
from josh.core.env import ConversationState
from josh.core.llm import ContextLengthError, LLMError
from josh.core.user import UserSimulator, UserTurn
from josh.types import ErrorCategory, Message, Task, assistant

CONTEXT_LENGTH: Final = "context_length"
USER_CONTEXT_LENGTH: Final = "user_context_length"
JUDGE_CONTEXT_LENGTH: Final = "judge_context_length"
OVERFLOW_ENDINGS = (CONTEXT_LENGTH, USER_CONTEXT_LENGTH, JUDGE_CONTEXT_LENGTH)
"""The endings of a prompt that outgrew its model's context: the agent's, the user simulator's, the judge's."""


@dataclass
class AgentStep:
    """The agent's sampled turns, or why there are none (``failure``, with its error categories; ``overflow``: its
    prompt outgrew the model's context)."""

    turns: list[AgentTurn] = field(default_factory=list)
    failure: str | None = None
    errors: list[ErrorCategory] = field(default_factory=list)
    overflow: str | None = None


@dataclass
class UserStep:
    """What the user simulator said (with its LLM accounting), or why it could not answer (``failure``; ``overflow``:
    its prompt outgrew its model's context)."""

    said: UserTurn
    failure: str | None = None
    overflow: str | None = None

    @property
    def errors(self) -> list[ErrorCategory]:
        return [ErrorCategory.USER_ERROR] if self.failure else []

    @property
    def ended(self) -> bool:
        """The conversation ends here: the user is done, failed, or its prompt overflowed."""
        return self.said.done or self.failure is not None or self.overflow is not None


async def agent_step(agent: Agent, history: list[Message], state: ConversationState, n: int = 1) -> AgentStep:
    """Ask ``agent`` for ``n`` sampled turns on ``history``; see the module docstring for failures."""
    try:
        turns = await agent.turn(history, state, n=n)
    except ContextLengthError as exc:
        return AgentStep(overflow=f"agent: {exc}")
    except Exception as exc:  # an agent bug or a backend failure fails this turn, never the run
        errors = [ErrorCategory.LLM_ERROR] if isinstance(exc, LLMError) else []
        return AgentStep(failure=f"{type(exc).__name__}: {exc}", errors=errors)
    if not turns:
        return AgentStep(failure="agent returned no turns")
    return AgentStep(turns=list(turns[:n]))


async def user_step(user_sim: UserSimulator, task: Task, transcript: list[Message]) -> UserStep:
    """Ask the user simulator to answer ``transcript``; see the module docstring for failures."""
    try:
        said = await user_sim.reply(task, transcript)
    except ContextLengthError as exc:
        return UserStep(UserTurn(text="", done=True, llm_calls=1), overflow=f"user simulator: {exc}")
    except Exception as exc:  # a simulator bug is the simulator's failure, never the agent's
        return UserStep(UserTurn(text="", done=True), f"user simulator: {type(exc).__name__}: {exc}")
    if said.error:
        return UserStep(said, f"user simulator: {said.error}")
    return UserStep(said)


def spoken(turn: AgentTurn) -> list[Message]:
    """What the user simulator sees of an agent turn: its reply, if it spoke (never tool traffic)."""
    return [assistant(turn.reply)] if turn.reply is not None else []
