"""The ACT agent: one JSON action per output and no thoughts; speaking is the ``respond`` action.

Results come back as a ``user`` message starting with ``Observation:`` (text protocol, no native tool calls).
"""

from __future__ import annotations

from josh.agents.loop import LoopAgent
from josh.agents.parsing import RESPOND_ACTION, Parsed, parse_act
from josh.agents.prompting import Example, dump
from josh.llm.base import Completion
from josh.types import Message, ToolCall, ToolResult, assistant, user

RESULT_PREFIX = "Observation:"
FEEDBACK_PREFIX = "FEEDBACK"


class ActAgent(LoopAgent):
    """``Action: {"name": ..., "arguments": {...}}``, one per output."""

    protocol = "act"

    def read(self, completion: Completion) -> Parsed:
        return parse_act(completion.text)

    def action_message(self, parsed: Parsed) -> Message:
        return assistant(parsed.text)

    def result_messages(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        return [user("\n".join(f"{RESULT_PREFIX} {r.content}" for r in results))]

    def feedback(self, problem: str) -> Message:
        return user(f"{FEEDBACK_PREFIX} your last output could not be used: {problem}.")

    def render_example(self, example: Example) -> str:
        call = dump({"name": example.name, "arguments": example.arguments})
        respond = dump({"name": RESPOND_ACTION, "arguments": {"content": example.reply}})
        return "\n".join(
            [
                f"Customer: {example.user}",
                f"Action: {call}",
                f"{RESULT_PREFIX} {example.result}",
                f"Action: {respond}",
            ]
        )
