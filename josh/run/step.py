"""One step of a conversation, the same for evaluation (``josh.run.conversation``) and search (``josh.search.algorithm``): the
agent takes its turn(s), the user simulator answers, and a failure on either side is data, never an exception.

The agreed handling of failures: an agent that raises (or returns no turn) fails that turn, with
``ErrorCategory.LLM_ERROR`` when its backend failed; a user simulator that raises, or gives up with an ``error``
(e.g. its LLM failed after its retries), fails with ``ErrorCategory.USER_ERROR``: the simulator's failure, kept
apart from the agent's errors. Either failure is one line (``"user simulator: ..."`` for the user) and ends the
conversation, or the search branch, where it happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from josh.core.agent import Agent, AgentTurn
from josh.core.env import ConversationState
from josh.core.llm import LLMError
from josh.core.user import UserSimulator, UserTurn
from josh.types import ErrorCategory, Message, Task, assistant


@dataclass
class AgentStep:
    """The agent's sampled turns, or why there are none (``failure``, with its error categories)."""

    turns: list[AgentTurn] = field(default_factory=list)
    failure: str | None = None
    errors: list[ErrorCategory] = field(default_factory=list)


@dataclass
class UserStep:
    """What the user simulator said (with its LLM accounting), or why it could not answer (``failure``)."""

    said: UserTurn
    failure: str | None = None

    @property
    def errors(self) -> list[ErrorCategory]:
        return [ErrorCategory.USER_ERROR] if self.failure else []

    @property
    def ended(self) -> bool:
        """The conversation ends here: the user is done, or failed."""
        return self.said.done or self.failure is not None


async def agent_step(agent: Agent, history: list[Message], state: ConversationState, n: int = 1) -> AgentStep:
    """Ask ``agent`` for ``n`` sampled turns on ``history``; see the module docstring for failures."""
    try:
        turns = await agent.turn(history, state, n=n)
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
    except Exception as exc:  # a simulator bug is the simulator's failure, never the agent's
        return UserStep(UserTurn(text="", done=True), f"user simulator: {type(exc).__name__}: {exc}")
    if said.error:
        return UserStep(said, f"user simulator: {said.error}")
    return UserStep(said)


def spoken(turn: AgentTurn) -> list[Message]:
    """What the user simulator sees of an agent turn: its reply, if it spoke (never tool traffic)."""
    return [assistant(turn.reply)] if turn.reply is not None else []
