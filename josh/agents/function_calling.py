"""The function-calling protocol: tools go through the chat template or API (``tools=``), calls come back as native
``tool_calls`` or as ``<tool_call>`` JSON in the text, and results are ``tool`` messages answering each call id.

An output whose call has no readable function name is logged as plain text and answered with a ``user``
feedback message (a nameless tool call cannot be sent back to an OpenAI-compatible server); a named call whose
arguments are not a JSON object gets an error ``tool`` result instead. Text that opens with ``{`` (fenced or not) is
read as a call attempt, so a reply to the user cannot open with a brace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from josh.agents.prompting import dump
from josh.agents.protocol import AgentProtocol, Step
from josh.core.llm import Completion
from josh.core.parsing import Parsed, parse_tool_calls
from josh.types import Message, ToolCall, ToolResult, assistant, tool_result
from josh.util.storable import clean_text


class FunctionCallingProtocol(AgentProtocol):
    """Native tool calling; see the module docstring."""

    name = "function_calling"
    native_tools = True

    def parse(self, completion: Completion, *, max_calls: int = 3) -> Parsed:
        parsed = parse_tool_calls(completion.text, completion.tool_calls, max_calls=max_calls)
        nameless = next((c for c in parsed.calls if not c.call.name), None)
        if nameless is None:
            return parsed
        text = clean_text(completion.text).strip()
        return replace(parsed, text=text, calls=(), reply=None, error=nameless.error, problem=nameless.problem)

    def call_texts(self, calls: Sequence[ToolCall]) -> list[str]:
        return [
            "\n".join(f"<tool_call>\n{dump({'name': c.name, 'arguments': c.arguments})}\n</tool_call>" for c in calls)
        ]

    def reply_text(self, reply: str) -> str:
        return reply

    def action_message(self, parsed: Parsed) -> Message:
        calls = [c.call for c in parsed.calls]
        return assistant(parsed.text or None, calls) if calls else assistant(parsed.reply or parsed.text)

    def result_messages(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> list[Message]:
        return [tool_result(c.id, r.content) for c, r in zip(calls, results, strict=True)]

    def assistant_steps(self, text: str, reply: str | None) -> list[Step]:
        """The text beside native tool calls is speech before them, or the reply itself."""
        if reply is not None and text.strip() == reply.strip():
            return [Step("speak", text)]
        return [Step("text", text)]

    def example_result(self, result: str) -> str:
        return f"Tool result: {result}"

    def example_reply(self, reply: str) -> str:
        return f"Agent: {reply}"
