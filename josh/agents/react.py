"""The ReACT agent: PLAN / APICALL / SPEAK commands in plain text, tools described compactly in the prompt.

Tool results come back as a ``user`` message starting with ``APIRETURN`` (one line per call): the ``tool`` role
needs a native tool call to answer, which this text protocol does not make, and OpenAI-compatible servers reject
a ``tool`` message without one. Text after the executed APICALLs of an output is cut from the logged message, so
a SPEAK is never recorded after a result it did not see.
"""

from __future__ import annotations

from josh.agents.grammar import react_grammar
from josh.agents.loop import TextProtocolAgent
from josh.agents.parsing import END_MARKER, Parsed, parse_react
from josh.agents.prompting import Example, dump
from josh.llm.base import Completion

RESULT_PREFIX = "APIRETURN"


class ReactAgent(TextProtocolAgent):
    """PLAN / APICALL / SPEAK, each command ending with ``<COMMAND_END>``."""

    protocol = "react"
    result_prefix = RESULT_PREFIX

    def read(self, completion: Completion) -> Parsed:
        return parse_react(completion.text, max_calls=self.config.max_calls_per_generation)

    def grammar(self) -> str | None:
        return react_grammar(self.env.tools)

    def render_example(self, example: Example) -> str:
        call = dump({"name": example.name, "parameters": example.arguments})
        lines = [f"Customer: {example.user}"]
        if example.thought:
            lines.append(f"PLAN {example.thought} {END_MARKER}")
        lines += [
            f"APICALL {call} {END_MARKER}",
            f"{RESULT_PREFIX} {example.result}",
            f"SPEAK {example.reply} {END_MARKER}",
        ]
        return "\n".join(lines)
