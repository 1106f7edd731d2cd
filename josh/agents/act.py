"""The ACT agent: one JSON action per output and no thoughts; speaking is the ``respond`` action.

Results come back as a ``user`` message starting with ``Observation:`` (text protocol, no native tool calls).
"""

from __future__ import annotations

from josh.agents.grammar import act_grammar
from josh.agents.loop import TextProtocolAgent
from josh.agents.parsing import RESPOND_ACTION, Parsed, parse_act
from josh.agents.prompting import Example, dump
from josh.llm.base import Completion

RESULT_PREFIX = "Observation:"


class ActAgent(TextProtocolAgent):
    """``Action: {"name": ..., "arguments": {...}}``, one per output."""

    protocol = "act"
    result_prefix = RESULT_PREFIX

    def read(self, completion: Completion) -> Parsed:
        return parse_act(completion.text)

    def grammar(self) -> str | None:
        return act_grammar(self.env.tools)

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
