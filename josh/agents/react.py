"""The ReACT protocol: PLAN / APICALL / SPEAK commands in plain text, tools described compactly in the prompt.

Tool results come back as a ``user`` message starting with ``APIRETURN`` (one line per call): the ``tool`` role
needs a native tool call to answer, which this text protocol does not make, and OpenAI-compatible servers reject
a ``tool`` message without one. Text after the executed APICALLs of an output is cut from the logged message, so
a SPEAK is never recorded after a result it did not see.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from josh.agents.grammar import MAX_REPLY_CHARS, call_schema
from josh.agents.prompting import dump
from josh.agents.protocol import AgentProtocol, Step, arguments_text
from josh.core.llm import Completion
from josh.core.parsing import Parsed, ReadCall, malformed, on_clean_text, read_call, with_call_errors
from josh.types import ErrorCategory, ToolCall

END_MARKER = "<COMMAND_END>"
RESULT_PREFIX = "APIRETURN"
MAX_COMMANDS = 64
_COMMAND = re.compile(r"(?:^|<COMMAND_END>)(?P<lead>[ \t]*)(PLAN|APICALL|SPEAK)\b[ \t]*:?", re.MULTILINE)


@dataclass(frozen=True)
class Command:
    """One ReACT command: its keyword, its body, and where it starts and ends in the output."""

    kind: str
    body: str
    start: int
    end: int


def iter_commands(text: str) -> Iterator[Command]:
    """The ReACT commands in ``text``, in order, read lazily. A keyword counts only at a line start or right after
    an end marker, so upper-case words inside speech or JSON values never split a command; a body runs to its end
    marker."""
    matches = _COMMAND.finditer(text)
    current = next(matches, None)
    while current is not None:
        following = next(matches, None)
        stop = following.start("lead") if following is not None else len(text)
        marker = text.find(END_MARKER, current.end(), stop)
        end = marker + len(END_MARKER) if marker >= 0 else stop
        body = text[current.end() : marker if marker >= 0 else stop].strip()
        yield Command(current.group(2), body, current.start("lead"), end)
        current = following


def split_commands(text: str) -> list[Command]:
    """Every ReACT command in ``text`` (see ``iter_commands``)."""
    return list(iter_commands(text))


def parse_react(text: str, *, max_calls: int = 3) -> Parsed:
    """Read PLAN / APICALL / SPEAK commands.

    Acted on: the leading PLANs, then either a run of up to ``max_calls`` APICALLs (anything after them is
    dropped: it was written without seeing their results) or one SPEAK (anything after it is dropped). Only the
    first ``MAX_COMMANDS`` commands are read.
    """
    return on_clean_text(text, lambda cleaned: _react(cleaned, max_calls))


def _react(text: str, max_calls: int) -> Parsed:
    commands = iter_commands(text)
    first = next(commands, None)
    if first is None:
        return malformed(text.strip(), "no command found: start each command with PLAN, APICALL or SPEAK")
    thoughts: list[str] = []
    calls: list[ReadCall] = []
    reply: str | None = None
    kept = first.start
    for command in itertools.islice(itertools.chain([first], commands), MAX_COMMANDS):
        if command.kind == "PLAN" and not calls:
            thoughts.append(command.body)
        elif command.kind == "APICALL" and len(calls) < max_calls:
            calls.append(read_call(command.body)[0])
        elif command.kind == "SPEAK" and not calls:
            reply = command.body
        else:
            break
        kept = command.end
        if reply is not None:
            break
    acted = text[first.start : kept].strip()
    thought = "\n".join(thoughts) or None
    rest = text[kept:].strip()
    if reply is not None and not reply:
        return Parsed(acted, thought=thought, error=ErrorCategory.MALFORMED, problem="SPEAK needs the words to say")
    if not calls and reply is None:
        return Parsed(
            acted, thought=thought, error=ErrorCategory.MALFORMED, problem="end your output with APICALL or SPEAK"
        )
    return with_call_errors(Parsed(acted, tuple(calls), reply, thought, dropped=rest))


def react_grammar(tools: list[dict[str, Any]]) -> str:
    """One ReACT output: an optional short PLAN, then one APICALL (``parameters`` for arguments) or one SPEAK."""
    schema = json.dumps(call_schema(tools, arguments_key="parameters"))
    return "\n".join(
        [
            "start: plan? (apicall | speak)",
            'plan: "PLAN " line " <COMMAND_END>\\n"',
            'apicall: "APICALL " call " <COMMAND_END>"',
            'speak: "SPEAK " line " <COMMAND_END>"',
            f"line: /[^<\\n]{{1,{MAX_REPLY_CHARS}}}/",
            f"call: %json {schema}",
            "",
        ]
    )


def _call_step(body: str) -> Step:
    """An APICALL body as a call step (the raw body as arguments when it is not a call object)."""
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return Step("call", arguments=body, body=body)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return Step("call", arguments=body, body=body)
    args = obj.get("arguments", obj.get("parameters", {}))
    return Step("call", name=obj["name"], arguments=arguments_text(args), body=body)


class ReactProtocol(AgentProtocol):
    """PLAN / APICALL / SPEAK, each command ending with ``<COMMAND_END>``; see the module docstring."""

    name = "react"
    result_prefix = RESULT_PREFIX

    def parse(self, completion: Completion, *, max_calls: int = 3) -> Parsed:
        return parse_react(completion.text, max_calls=max_calls)

    def call_texts(self, calls: Sequence[ToolCall]) -> list[str]:
        return [" ".join(_command("APICALL", _call_json(c)) for c in calls)]

    def reply_text(self, reply: str) -> str:
        return _command("SPEAK", reply)

    def example_thought(self, thought: str) -> str | None:
        return _command("PLAN", thought)

    def grammar(self, tools: list[dict[str, Any]]) -> str | None:
        return react_grammar(tools)

    def assistant_steps(self, text: str, reply: str | None) -> list[Step]:
        if reply is not None and text.strip() == reply.strip():
            return [Step("speak", text)]
        commands = split_commands(text)
        if not commands:
            return [Step("text", text)]
        lead = text[: commands[0].start].strip()
        steps = [Step("text", lead)] if lead else []
        for command in commands:
            if command.kind == "APICALL":
                steps.append(_call_step(command.body))
            else:
                steps.append(Step("plan" if command.kind == "PLAN" else "speak", command.body))
        return steps


def _call_json(call: ToolCall) -> str:
    """The call as JSON, with the end marker escaped inside strings (``\\u003c`` reads back as ``<``)."""
    return dump({"name": call.name, "parameters": call.arguments}).replace(END_MARKER, "\\u003c" + END_MARKER[1:])


def _command(kind: str, words: str) -> str:
    """``KIND words <COMMAND_END>``; words opening with a colon get one written before them, which the reader drops."""
    lead = ": " if words.lstrip().startswith(":") else " "
    return f"{kind}{lead}{words} {END_MARKER}"
