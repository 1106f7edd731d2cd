"""The function-calling protocol: tools go through the chat template or API (``tools=``), calls come back as native
``tool_calls`` or as ``<tool_call>`` JSON in the text, and results are ``tool`` messages answering each call id.

An output whose call has no readable function name is logged as plain text and answered with a ``user``
feedback message (a nameless tool call cannot be sent back to an OpenAI-compatible server); a named call whose
arguments are not a JSON object gets an error ``tool`` result instead. Text that opens with ``{`` (fenced or not) is
read as a call attempt, so a reply to the user cannot open with a brace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace

from josh.agents.parsing import Parsed, ReadCall, malformed, on_clean_text, read_call, unfence, with_call_errors
from josh.agents.prompting import dump
from josh.agents.protocol import AgentProtocol, Step
from josh.llm.base import Completion
from josh.types import ErrorCategory, Message, ToolCall, ToolResult, assistant, tool_result
from josh.util.storable import clean_text, json_problem, to_storable

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def parse_tool_calls(text: str, native: Sequence[ToolCall] = (), *, max_calls: int = 3) -> Parsed:
    """Read a function-calling output: native ``tool_calls`` when the backend gave them, else ``<tool_call>``
    blocks or a bare JSON call object in the text; plain text is a reply to the user."""
    return on_clean_text(text, lambda cleaned: _tool_calls(cleaned, native, max_calls))


def _tool_calls(text: str, native: Sequence[ToolCall], max_calls: int) -> Parsed:
    if native:
        calls = tuple(_native(c) for c in native[:max_calls])
        return with_call_errors(Parsed(text.strip(), calls))
    blocks = list(_TOOL_CALL.finditer(text))
    if blocks:
        calls = tuple(read_call(b.group(1))[0] for b in blocks[:max_calls])
        kept = blocks[: len(calls)][-1].end()
        speech = text[: blocks[0].start()].strip()
        return with_call_errors(Parsed(speech, calls, dropped=text[kept:].strip()))
    stripped = unfence(text).strip()
    if stripped.startswith("{"):
        call, end = read_call(stripped)
        return with_call_errors(Parsed("", (call,), dropped=stripped[end:].strip()))
    if not stripped:
        return malformed("", "the output was empty: call a tool or reply to the customer")
    return Parsed(text.strip(), reply=text.strip())


def _native(call: ToolCall) -> ReadCall:
    if not call.name.strip():
        return ReadCall(call, "the tool call has no function name")
    if isinstance(call.arguments, str):
        return ReadCall(call, "the tool call's arguments are not a JSON object")
    unstorable = json_problem(call.arguments)
    if unstorable is not None:
        raw = ToolCall(name=call.name, arguments=json.dumps(to_storable(call.arguments)), id=call.id)
        return ReadCall(raw, f"the tool call's arguments cannot be used: {unstorable}", ErrorCategory.UNSTORABLE)
    return ReadCall(call)


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
