"""The turn loop every prompted agent shares: generate, read the output under the agent's protocol, run its tool
calls on the turn's fork of the state, feed results (or corrective feedback) back, until the agent speaks.

Subclasses only say how to read an output and how to write messages (``read``, ``action_message``,
``result_messages``, ``render_example``; ``TextProtocolAgent`` supplies the message hooks for plain-text
protocols); corrective feedback, caps, error categories and n-way sampling live here.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from josh.agents.base import AgentTurn
from josh.agents.parsing import Parsed, ReadCall
from josh.agents.prompting import Example, examples, render
from josh.agents.rendering import render_messages
from josh.envs.base import ConversationState, Env
from josh.llm.base import LLM, Completion, LLMError, Sampling
from josh.types import ErrorCategory, Message, Task, ToolCall, ToolResult, assistant, system, tool_result, user

log = logging.getLogger(__name__)


class AgentConfig(BaseModel):
    """Options shared by the prompted agents; unknown names are rejected."""

    model_config = ConfigDict(extra="forbid")

    sampling: Sampling = Field(default_factory=Sampling)
    max_generations: int = Field(3, ge=1, description="model calls per agent turn before it ends without a reply")
    max_calls_per_generation: int = Field(3, ge=1, description="tool calls run from one output; extra ones dropped")
    examples: int = Field(2, ge=0, description="worked examples shown to the model")
    examples_as_turns: bool = Field(
        False, description="give the worked examples as earlier chat turns instead of inside the system prompt"
    )
    constrain: bool = Field(
        False, description="decode every output under the protocol's grammar over the tools' JSON schemas"
    )


FEEDBACK_PREFIX = "FEEDBACK"


class LoopAgent(ABC):
    """An agent that talks to an ``LLM`` under a text protocol; see the module docstring."""

    protocol: ClassVar[str]

    def __init__(self, env: Env, llm: LLM, config: AgentConfig | None = None, **options: Any) -> None:
        if llm is None:
            raise ValueError(f"the {self.protocol} agent needs an LLM backend")
        self.env = env
        self.llm = llm
        unknown = sorted(set(options) - set(AgentConfig.model_fields))
        if unknown:
            valid = ", ".join(AgentConfig.model_fields)
            raise ValueError(f"unknown option {', '.join(unknown)} for the {self.protocol} agent; valid: {valid}")
        self.config = config or AgentConfig(**options)
        chosen = examples(getattr(env, "name", "generic"))[: self.config.examples]
        in_prompt = chosen and not self.config.examples_as_turns
        self._example_text = "Examples:\n" + "\n\n".join(self.render_example(e) for e in chosen) if in_prompt else ""
        self._preamble = example_turns(self, chosen) if self.config.examples_as_turns else []
        self.sampling = self.config.sampling
        if self.config.constrain:
            grammar = self.grammar()
            if grammar is None:
                raise ValueError(f"the {self.protocol} agent has no output grammar; drop the constrain option")
            self.sampling = self.sampling.model_copy(update={"grammar": grammar})

    @abstractmethod
    def read(self, completion: Completion) -> Parsed:
        """Read one generation under the agent's protocol."""

    @abstractmethod
    def action_message(self, parsed: Parsed) -> Message:
        """The assistant message to log for a generation (only the part that was acted on)."""

    @abstractmethod
    def result_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        """The messages that show the model its calls' results."""

    def feedback(self, problem: str) -> Message:
        """The corrective message after an output that could not be used."""
        return user(f"{FEEDBACK_PREFIX} your last output could not be used: {problem}.")

    @abstractmethod
    def render_example(self, example: Example) -> str:
        """One worked example written in the agent's protocol."""

    def grammar(self) -> str | None:
        """The grammar of one output over the environment's tools, for constrained decoding (``None``: none)."""
        return None

    @property
    def llm_tools(self) -> list[dict[str, Any]] | None:
        """Tool schemas passed to the backend (``None``: the tools are described in the prompt instead)."""
        return None

    def system_prompt(self, task: Task) -> str:
        """The full system prompt for a task: protocol, tools, the environment's own text, examples."""
        return render(
            self.protocol, tools=self.env.tools, domain=self.env.system_prompt(task), example_text=self._example_text
        )

    def preamble(self) -> list[Message]:
        """Messages between the system prompt and the conversation: the worked examples, when given as turns."""
        return list(self._preamble)

    def prompt(self, history: list[Message], task: Task) -> list[Message]:
        return [system(self.system_prompt(task)), *self._preamble, *history]

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        """Sample ``n`` turns: one ``n``-sample request on the shared prompt, then each branch goes on alone."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompt = self.prompt(history, state.task)
        try:
            first = list(await self.llm.chat(prompt, tools=self.llm_tools, n=n, sampling=self.sampling))
        except LLMError as exc:
            log.warning("agent LLM call failed: %s", exc)
            first = []
        branches = [self._branch(prompt, state.fork(), c) for c in first[:n]]
        turns = list(await asyncio.gather(*branches))
        return turns + [_failed(state.fork()) for _ in range(n - len(turns))]

    async def _branch(self, prompt: list[Message], state: ConversationState, completion: Completion) -> AgentTurn:
        turn = AgentTurn(state=state, llm_calls=1)
        while True:
            turn.prompt_tokens += completion.prompt_tokens
            turn.completion_tokens += completion.completion_tokens
            if self._act(turn, completion):
                return turn
            if turn.llm_calls >= self.config.max_generations:
                turn.errors.append(ErrorCategory.NO_REPLY)
                return turn
            turn.llm_calls += 1
            try:
                more = await self.llm.chat(prompt + turn.messages, tools=self.llm_tools, n=1, sampling=self.sampling)
            except LLMError as exc:
                log.warning("agent LLM call failed: %s", exc)
                more = []
            if not more:
                turn.errors.append(ErrorCategory.LLM_ERROR)
                return turn
            completion = more[0]

    def _act(self, turn: AgentTurn, completion: Completion) -> bool:
        """Apply one generation to the turn; true when the turn is over (the agent spoke or the env ended it)."""
        parsed = self.read(completion)
        if parsed.repaired:
            turn.errors.append(ErrorCategory.UNSTORABLE)
        turn.messages.append(self.action_message(parsed))
        if parsed.calls:
            results = [self._execute(turn.state, c) for c in parsed.calls]
            turn.messages.extend(self.result_messages([c.call for c in parsed.calls], results))
            for result in results:
                if result.error is not None:
                    turn.errors.append(result.error)
                turn.completed_goals.extend(g for g in result.completed_goals if g not in turn.completed_goals)
            return turn.state.terminated or any(r.terminal for r in results)
        if parsed.reply is not None and parsed.error is None:
            turn.reply = parsed.reply
            return True
        turn.errors.append(parsed.error or ErrorCategory.MALFORMED)
        turn.messages.append(self.feedback(parsed.problem or "the output could not be used"))
        return False

    def _execute(self, state: ConversationState, read: ReadCall) -> ToolResult:
        """Run one call on the branch's state; malformed calls and tool crashes become error results."""
        if not read.ok:
            return ToolResult(content=f"ERROR: {read.problem}", error=read.error)
        try:
            return self.env.call(state, read.call)
        except Exception as exc:  # an environment must not raise, but one bad call must not end the run either
            log.exception("environment raised on %s", read.call.name)
            return ToolResult(content=f"ERROR: the tool failed ({type(exc).__name__})", error=ErrorCategory.TOOL_ERROR)


class TextProtocolAgent(LoopAgent):
    """A protocol written as plain text (ReACT, ACT): the output is logged as the model wrote it, up to the part
    acted on, and the results come back as one user message of ``result_prefix`` lines."""

    result_prefix: ClassVar[str]

    def action_message(self, parsed: Parsed) -> Message:
        return assistant(parsed.text)

    def result_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        return [user("\n".join(f"{self.result_prefix} {r.content}" for r in results))]


def example_turns(agent: LoopAgent, chosen: tuple[Example, ...] | list[Example]) -> list[Message]:
    """Worked examples as chat turns in the agent's protocol: the customer asks, the agent calls a tool, sees the
    result and replies, each written exactly as the agent writes and reads them."""
    messages: list[Message] = []
    for k, example in enumerate(chosen):
        call = ToolCall(id=f"example-{k}", name=example.name, arguments=example.arguments)
        canonical = [user(example.user), assistant(None, [call]), tool_result(call.id, example.result)]
        messages += render_messages(agent, [*canonical, assistant(example.reply)])
    return messages


def _failed(state: ConversationState) -> AgentTurn:
    return AgentTurn(state=state, errors=[ErrorCategory.LLM_ERROR], llm_calls=1)
