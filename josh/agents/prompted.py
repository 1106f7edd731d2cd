"""Prompted agents: an ``LLM`` writing under an ``AgentProtocol``.

``AgentPrompt`` is what the model is shown besides the conversation (system prompt with the protocol, tools and
worked examples; worked examples as earlier turns; the tools passed to the backend) and needs no model, so the
warm start writes its rows with it. ``PromptedAgent`` adds the turn loop every protocol shares: generate, read the
output under the protocol, run its tool calls on the turn's fork of the state, feed results (or corrective
feedback) back, until the agent speaks; caps, error categories and n-way sampling live here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.agents.prompting import ToolListing, examples, render
from josh.agents.protocol import AgentProtocol
from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState, Env, call_tool
from josh.core.llm import LLM, Completion, ContextLengthError, LLMError, Sampling
from josh.core.parsing import ReadCall
from josh.types import ErrorCategory, Message, Task, ToolResult, call_id, system

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
    tool_listing: ToolListing = Field(
        "full",
        description="tools in the system prompt: full (arguments, allowed values, descriptions), brief (name and "
        "argument keys), none (the grammar of constrain alone tells the model the tools)",
    )

    @classmethod
    def of(cls, protocol: str, options: dict[str, Any]) -> AgentConfig:
        """The config from option names; an unknown one is a ``ValueError`` listing the valid ones."""
        unknown = sorted(set(options) - set(cls.model_fields))
        if unknown:
            valid = ", ".join(cls.model_fields)
            raise ValueError(f"unknown option {', '.join(unknown)} for the {protocol} agent; valid: {valid}")
        return cls(**options)


class AgentPrompt:
    """What a prompted agent shows its model for a task in ``env``, under ``protocol``; no model needed."""

    def __init__(self, protocol: AgentProtocol, env: Env, config: AgentConfig | None = None) -> None:
        self.protocol = protocol
        self.env = env
        self.config = config or AgentConfig()
        if protocol.native_tools and self.config.tool_listing != "full":
            raise ValueError(f"the {protocol.name} agent passes its tools to the backend; drop the tool_listing option")
        chosen = examples(env.name)[: self.config.examples]
        as_turns = self.config.examples_as_turns
        shown = "\n\n".join(protocol.example(e) for e in chosen)
        self._example_text = f"Examples:\n{shown}" if chosen and not as_turns else ""
        max_calls = self.config.max_calls_per_generation
        self._preamble = protocol.example_turns(chosen, max_calls=max_calls) if as_turns else []

    @property
    def llm_tools(self) -> list[dict[str, Any]] | None:
        """Tool schemas passed to the backend (``None``: the tools are described in the prompt instead)."""
        return self.env.tools if self.protocol.native_tools else None

    def system_prompt(self, task: Task) -> str:
        """The full system prompt for a task: protocol, tools, the environment's own text, examples."""
        return render(
            self.protocol.template(),
            tools=self.env.tools,
            domain=self.env.system_prompt(task),
            example_text=self._example_text,
            listing=self.config.tool_listing,
        )

    def preamble(self) -> list[Message]:
        """Messages between the system prompt and the conversation: the worked examples, when given as turns."""
        return list(self._preamble)

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame(
            system=self.system_prompt(task),
            preamble=self.preamble(),
            tools=list(self.llm_tools or []),
            protocol=self.protocol.name,
        )

    def render(self, messages: list[Message]) -> list[Message]:
        """A canonical conversation rewritten in the protocol (``RenderError`` if it cannot be, faithfully)."""
        return self.protocol.render(messages, max_calls=self.config.max_calls_per_generation)


class PromptedAgent(AgentPrompt):
    """An ``AgentPrompt`` with its model: the ``Agent`` of every protocol (see the module docstring)."""

    def __init__(self, protocol: AgentProtocol, env: Env, llm: LLM, config: AgentConfig | None = None) -> None:
        if llm is None:
            raise ValueError(f"the {protocol.name} agent needs an LLM backend")
        super().__init__(protocol, env, config)
        self.llm = llm
        self.sampling = self.config.sampling
        if self.config.constrain:
            grammar = protocol.grammar(env.tools)
            if grammar is None:
                raise ValueError(f"the {protocol.name} agent has no output grammar; drop the constrain option")
            self.sampling = self.sampling.model_copy(update={"grammar": grammar})

    def prompt(self, history: list[Message], task: Task) -> list[Message]:
        return [system(self.system_prompt(task)), *self._preamble, *history]

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        """Sample ``n`` turns: one ``n``-sample request on the shared prompt, then each branch goes on alone."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompt = self.prompt(history, state.task)
        try:
            first = list(await self.llm.chat(prompt, tools=self.llm_tools, n=n, sampling=self.sampling))
        except ContextLengthError:
            raise  # the conversation's own end (josh.run.step), not a failed turn
        except LLMError as exc:
            log.warning("agent LLM call failed: %s", exc)
            first = []
        branches = [self._branch(prompt, state.fork(), c, len(history)) for c in first[:n]]
        turns = list(await asyncio.gather(*branches))
        return turns + [_failed(state.fork()) for _ in range(n - len(turns))]

    async def _branch(
        self, prompt: list[Message], state: ConversationState, completion: Completion, at: int
    ) -> AgentTurn:
        """One branch's turn; ``at``: the position of its first message in the conversation (its calls' ids)."""
        turn = AgentTurn(state=state, llm_calls=1)
        while True:
            turn.prompt_tokens += completion.prompt_tokens
            turn.completion_tokens += completion.completion_tokens
            if await self._act(turn, completion, at + len(turn.messages)):
                return turn
            if turn.llm_calls >= self.config.max_generations:
                turn.errors.append(ErrorCategory.NO_REPLY)
                return turn
            turn.llm_calls += 1
            try:
                more = await self.llm.chat(prompt + turn.messages, tools=self.llm_tools, n=1, sampling=self.sampling)
            except ContextLengthError as exc:  # the tool results outgrew the context: the turn ends as it stands
                turn.overflow = str(exc)
                return turn
            except LLMError as exc:
                log.warning("agent LLM call failed: %s", exc)
                more = []
            if not more:
                turn.errors.append(ErrorCategory.LLM_ERROR)
                return turn
            completion = more[0]

    async def _act(self, turn: AgentTurn, completion: Completion, position: int) -> bool:
        """Apply one generation, the message at ``position`` in the conversation, to the turn (its calls get ids from
        that position); true when the turn is over (the agent spoke or the env ended it)."""
        parsed = self.protocol.parse(completion, max_calls=self.config.max_calls_per_generation)
        parsed = parsed.with_ids([call_id(position, k) for k in range(len(parsed.calls))])
        if parsed.repaired:
            turn.errors.append(ErrorCategory.UNSTORABLE)
        turn.messages.append(self.protocol.action_message(parsed))
        if parsed.calls:
            results = [await self._execute(turn.state, c) for c in parsed.calls]
            turn.messages.extend(self.protocol.result_messages([c.call for c in parsed.calls], results))
            for result in results:
                if result.error is not None:
                    turn.errors.append(result.error)
                turn.completed_goals.extend(g for g in result.completed_goals if g not in turn.completed_goals)
            return turn.state.terminated or any(r.terminal for r in results)
        if parsed.reply is not None and parsed.error is None:
            turn.reply = parsed.reply
            return True
        turn.errors.append(parsed.error or ErrorCategory.MALFORMED)
        turn.messages.append(self.protocol.feedback(parsed.problem or "the output could not be used"))
        return False

    async def _execute(self, state: ConversationState, read: ReadCall) -> ToolResult:
        """Run one call on the branch's state; malformed calls and tool crashes become error results."""
        if not read.ok:
            return ToolResult(content=f"ERROR: {read.problem}", error=read.error)
        try:
            return await call_tool(self.env, state, read.call)
        except Exception as exc:  # an environment must not raise, but one bad call must not end the run either
            log.exception("environment raised on %s", read.call.name)
            return ToolResult(content=f"ERROR: the tool failed ({type(exc).__name__})", error=ErrorCategory.TOOL_ERROR)


def _failed(state: ConversationState) -> AgentTurn:
    return AgentTurn(state=state, errors=[ErrorCategory.LLM_ERROR], llm_calls=1)
