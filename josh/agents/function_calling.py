"""The function-calling agent: tools go through the chat template or API (``tools=``), calls come back as native
``tool_calls`` or as ``<tool_call>`` JSON in the text, and results are ``tool`` messages answering each call id.

An output whose call has no readable function name is logged as plain text and answered with a ``user``
feedback message (a nameless tool call cannot be sent back to an OpenAI-compatible server); a named call whose
arguments are not a JSON object gets an error ``tool`` result instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from josh.agents.loop import LoopAgent
from josh.agents.parsing import Parsed, parse_tool_calls
from josh.agents.prompting import Example, dump
from josh.llm.base import Completion
from josh.storable import clean_text
from josh.types import Message, ToolCall, ToolResult, assistant, tool_result


class FunctionCallingAgent(LoopAgent):
    """Native tool calling; see the module docstring."""

    protocol = "function_calling"

    @property
    def llm_tools(self) -> list[dict[str, Any]] | None:
        return self.env.tools

    def read(self, completion: Completion) -> Parsed:
        parsed = parse_tool_calls(
            completion.text, completion.tool_calls, max_calls=self.config.max_calls_per_generation
        )
        nameless = next((c for c in parsed.calls if not c.call.name), None)
        if nameless is None:
            return parsed
        text = clean_text(completion.text).strip()
        return replace(parsed, text=text, calls=(), reply=None, error=nameless.error, problem=nameless.problem)

    def action_message(self, parsed: Parsed) -> Message:
        calls = [c.call for c in parsed.calls]
        return assistant(parsed.text or None, calls) if calls else assistant(parsed.reply or parsed.text)

    def result_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        return [tool_result(c.id, r.content) for c, r in zip(calls, results, strict=True)]

    def render_example(self, example: Example) -> str:
        call = dump({"name": example.name, "arguments": example.arguments})
        return "\n".join(
            [
                f"Customer: {example.user}",
                f"<tool_call>\n{call}\n</tool_call>",
                f"Tool result: {example.result}",
                f"Agent: {example.reply}",
            ]
        )
