"""Agent protocols: how a prompted agent's model writes tool calls and replies, and how results come back to it.

One ``AgentProtocol`` object per format holds everything about it, so that the agents, the warm start, the worked
examples, the viewer and the tests read and write the format in one place: ``parse`` reads one model output,
``call_texts`` / ``reply_text`` write calls and replies as the model would, ``action_message`` /
``result_messages`` are the messages logged for an output and its results, ``example`` writes a worked example for
the system prompt, ``grammar`` pins outputs to the tools for constrained decoding, and ``steps`` splits an agent
turn into what the viewer shows. ``render`` rewrites a canonical conversation (OpenAI-style tool calls, tool
results, plain replies) in the protocol, reading every output back with ``parse`` so that nothing is written that
the agent would read differently.

A new protocol is one module with a subclass (``name``, ``parse``, ``call_texts``, ``reply_text``, and for a text
protocol ``result_prefix``; its system prompt is ``prompts/<name>.txt`` unless it overrides ``template``) and one
line ``register_protocol(MyProtocol())`` in ``josh/agents/__init__.py``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from string import Template
from typing import Any, ClassVar

from josh.agents.prompting import Example, template
from josh.core.llm import Completion
from josh.core.parsing import Parsed
from josh.types import Message, ToolCall, ToolResult, assistant, tool_result, user

FEEDBACK_PREFIX = "FEEDBACK"


class RenderError(ValueError):
    """A message has no faithful rendering in the protocol."""


@dataclass
class Step:
    """One readable piece of an agent turn (what the viewer shows).

    ``kind`` is ``plan``, ``call``, ``speak``, ``result`` (a tool result no call claimed), ``feedback`` (a parse
    error told to the agent) or ``text`` (anything else the agent wrote)."""

    kind: str
    body: str = ""
    name: str = ""
    arguments: str = ""
    result: str | None = None
    verdict: str = ""
    issues: str = ""


def pretty(text: str | None) -> str:
    """Indent JSON text for reading; anything else is returned unchanged."""
    if not text:
        return text or ""
    stripped = text.strip()
    if stripped[:1] not in "[{":
        return text
    try:
        return json.dumps(json.loads(stripped), indent=1, ensure_ascii=False)
    except (json.JSONDecodeError, RecursionError):
        return text


def arguments_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


class AgentProtocol(ABC):
    """One output format; see the module docstring. The defaults describe a plain-text protocol: outputs are
    logged as the model wrote them (up to the part acted on) and results come back as one ``user`` message with
    one ``result_prefix`` line per call."""

    name: ClassVar[str]
    result_prefix: ClassVar[str] = ""
    native_tools: ClassVar[bool] = False
    """The tool schemas go to the backend (``tools=``) instead of being described in the prompt."""

    @abstractmethod
    def parse(self, completion: Completion, *, max_calls: int = 3) -> Parsed:
        """Read one model output; never raises (see ``josh.core.parsing``)."""

    @abstractmethod
    def call_texts(self, calls: Sequence[ToolCall]) -> list[str]:
        """The outputs that make ``calls``: one per call, or one for all when the protocol batches them."""

    @abstractmethod
    def reply_text(self, reply: str) -> str:
        """The output that says ``reply`` to the user."""

    def action_message(self, parsed: Parsed) -> Message:
        """The assistant message logged for an output (only the part that was acted on)."""
        return assistant(parsed.text)

    def result_messages(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> list[Message]:
        """The messages that show the model its calls' results."""
        return [user("\n".join(f"{self.result_prefix} {r.content}" for r in results))]

    def feedback(self, problem: str) -> Message:
        """The corrective message after an output that could not be used."""
        return user(f"{FEEDBACK_PREFIX} your last output could not be used: {problem}.")

    def grammar(self, tools: list[dict[str, Any]]) -> str | None:
        """The grammar of one output over ``tools``, for constrained decoding (``None``: the protocol has none)."""
        return None

    def template(self) -> Template:
        """The system-prompt template (``$tools``, ``$domain``, ``$examples``)."""
        return template(self.name)

    # worked examples ------------------------------------------------------------------------------------------

    def example_result(self, result: str) -> str:
        """How a worked example in the system prompt shows a tool result."""
        return f"{self.result_prefix} {result}"

    def example_reply(self, reply: str) -> str:
        """How a worked example in the system prompt shows the reply."""
        return self.reply_text(reply)

    def example_thought(self, thought: str) -> str | None:
        """How a worked example shows the agent's reasoning (``None``: the protocol writes no thoughts)."""
        return None

    def example(self, example: Example) -> str:
        """One worked example, written in the protocol, for the system prompt."""
        call = ToolCall(name=example.name, arguments=example.arguments)
        thought = self.example_thought(example.thought) if example.thought else None
        lines = [f"Customer: {example.user}", *([thought] if thought else []), *self.call_texts([call])]
        return "\n".join([*lines, self.example_result(example.result), self.example_reply(example.reply)])

    def example_turns(self, examples: Sequence[Example], *, max_calls: int = 3) -> list[Message]:
        """Worked examples as chat turns: the customer asks, the agent calls a tool, sees the result and replies,
        each written exactly as the agent writes and reads them."""
        messages: list[Message] = []
        for k, example in enumerate(examples):
            call = ToolCall(id=f"example-{k}", name=example.name, arguments=example.arguments)
            canonical = [user(example.user), assistant(None, [call]), tool_result(call.id, example.result)]
            messages += self.render([*canonical, assistant(example.reply)], max_calls=max_calls)
        return messages

    # canonical conversations ----------------------------------------------------------------------------------

    def render(self, messages: Sequence[Message], *, max_calls: int = 3) -> list[Message]:
        """Rewrite a canonical conversation (user, assistant tool calls, tool results, replies) in the protocol;
        ``RenderError`` when an output would not read back as the same calls or reply."""
        results = {m.tool_call_id: m.content or "" for m in messages if m.role == "tool"}
        out: list[Message] = []
        for message in messages:
            if message.role == "user":
                out.append(message)
            elif message.role == "assistant" and message.tool_calls:
                calls = list(message.tool_calls)
                texts = self.call_texts(calls)
                groups = [[c] for c in calls] if len(texts) > 1 else [calls]
                for text, group in zip(texts, groups, strict=True):
                    parsed = self.parse(Completion(text=text), max_calls=max_calls)
                    if not _same_calls(parsed, group):
                        raise RenderError(f"the {self.name} protocol reads {text!r} differently")
                    parsed = parsed.with_ids([c.id for c in group])  # the conversation's ids, not the reader's
                    out.append(self.action_message(parsed))
                    found = [ToolResult(content=results.get(c.id, "")) for c in group]
                    out.extend(self.result_messages([r.call for r in parsed.calls], found))
            elif message.role == "assistant" and message.content:
                parsed = self.parse(Completion(text=self.reply_text(message.content)), max_calls=max_calls)
                if parsed.reply != message.content.strip() or parsed.calls:
                    raise RenderError(f"the {self.name} protocol reads the reply {message.content!r} differently")
                out.append(self.action_message(parsed))
        return out

    # the viewer -----------------------------------------------------------------------------------------------

    def assistant_steps(self, text: str, reply: str | None) -> list[Step]:
        """The steps of the text of one assistant message, read with ``parse`` (native tool calls are added by
        ``steps``): its thought, then its calls or what it says; text that reads as neither is shown as written."""
        parsed = self.parse(Completion(text=text))
        thought = [Step("plan", parsed.thought)] if parsed.thought else []
        if parsed.calls:
            written = text if len(parsed.calls) == 1 else ""
            return thought + [
                Step("call", name=c.call.name, arguments=arguments_text(c.call.arguments), body=written)
                for c in parsed.calls
            ]
        if parsed.reply is not None:
            return [*thought, Step("speak", parsed.reply)]
        return [Step("text", text)]

    def result_texts(self, content: str) -> list[str] | None:
        """The results in a result message, one per call (``None``: not a result message of this protocol)."""
        if not self.result_prefix or not content.startswith(self.result_prefix):
            return None
        results: list[str] = []
        for line in content.split("\n"):
            if line.startswith(self.result_prefix):
                results.append(line[len(self.result_prefix) :].strip())
            else:
                results[-1] += "\n" + line
        return results

    def steps(self, messages: Sequence[Message], reply: str | None) -> list[Step]:
        """The readable steps of one agent turn, each tool call paired with its result."""
        steps: list[Step] = []
        by_call: dict[str, Step] = {}
        for msg in messages:
            content = msg.content or ""
            if msg.role == "assistant":
                if content.strip():
                    steps.extend(self.assistant_steps(content, reply))
                for call in msg.tool_calls or ():
                    step = Step("call", name=call.name, arguments=arguments_text(call.arguments))
                    by_call[call.id] = step
                    steps.append(step)
            elif msg.role == "tool" and msg.tool_call_id in by_call and by_call[msg.tool_call_id].result is None:
                by_call[msg.tool_call_id].result = pretty(content)
            elif content.startswith(FEEDBACK_PREFIX):
                steps.append(Step("feedback", content))
            elif not _attach_results(steps, self.result_texts(content)):
                steps.append(Step("result", pretty(content)))
        if reply is not None and not any(s.kind == "speak" for s in steps):
            steps.append(Step("speak", reply))
        return steps


def _same_calls(parsed: Parsed, wanted: Sequence[ToolCall]) -> bool:
    got = [(r.call.name, r.call.arguments) for r in parsed.calls if r.ok]
    return len(got) == len(parsed.calls) and got == [(c.name, c.arguments) for c in wanted]


def _attach_results(steps: list[Step], results: list[str] | None) -> bool:
    """Give the call steps just shown their results, when there is one result per call."""
    if not results:
        return False
    pending = []
    for step in reversed(steps):
        if step.kind != "call" or step.result is not None:
            break
        pending.append(step)
    if len(pending) != len(results):
        return False
    for step, result in zip(reversed(pending), results, strict=True):
        step.result = pretty(result)
    return True
