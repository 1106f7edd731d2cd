"""Readers for what an agent model writes: ReACT commands, tool calls in text, and ACT actions.

Every reader is a pure function that never raises: whatever the model wrote (half a JSON object, garbage, an
empty string, endless text), the answer is a ``Parsed`` whose ``error`` says ``ErrorCategory.MALFORMED`` when
nothing usable came out, with a ``problem`` sentence the agent can be shown as corrective feedback.

Whatever a reader returns can be stored: lone surrogates in the text are replaced by U+FFFD (``repaired`` is set),
and a call whose JSON cannot be stored (a surrogate escape, nesting past ``MAX_DEPTH``) is refused with
``ErrorCategory.UNSTORABLE``. Numbers Python will not read (over 4,300 digits, ``NaN``) make the JSON malformed.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from josh.storable import DECODER, MAX_DEPTH, clean_text, json_problem, read_json, to_storable
from josh.types import ErrorCategory, ToolCall

END_MARKER = "<COMMAND_END>"
RESPOND_ACTION = "respond"

_UNSTORABLE = ErrorCategory.UNSTORABLE
_FENCE = re.compile(r"```[A-Za-z0-9_-]*")
_COMMAND = re.compile(r"(?:^|<COMMAND_END>)(?P<lead>[ \t]*)(PLAN|APICALL|SPEAK)\b[ \t]*:?", re.MULTILINE)
MAX_COMMANDS = 64
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_ACTION = re.compile(r"^[ \t]*Action[ \t]*:", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class ReadCall:
    """One call the model tried to make; ``problem`` is set (and ``call.arguments`` is the raw text) when it is
    malformed."""

    call: ToolCall
    problem: str | None = None
    error: ErrorCategory = ErrorCategory.MALFORMED

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Parsed:
    """One generation read under a protocol.

    ``text`` is the part of the output that is acted on (what gets logged and trained on): text after the last
    executed call, or after a reply, is cut off. ``reply`` is what the user hears; ``calls`` are run in order.
    ``repaired``: the output held lone surrogates, replaced by U+FFFD before it was read.
    """

    text: str
    calls: tuple[ReadCall, ...] = ()
    reply: str | None = None
    thought: str | None = None
    error: ErrorCategory | None = None
    problem: str | None = None
    dropped: str = field(default="", repr=False)
    repaired: bool = False

    @property
    def has_action(self) -> bool:
        return bool(self.calls) or self.reply is not None


def _malformed(text: str, problem: str) -> Parsed:
    return Parsed(text=text, error=ErrorCategory.MALFORMED, problem=problem)


def _unfence(text: str) -> str:
    return _FENCE.sub("", text)


def _on_clean_text(text: str, read: Callable[[str], Parsed]) -> Parsed:
    """``read`` applied to ``text`` with its lone surrogates replaced; ``repaired`` says whether there were any."""
    cleaned = clean_text(text)
    parsed = read(cleaned)
    return parsed if cleaned is text else replace(parsed, repaired=True)


def _decode_problem(exc: ValueError | RecursionError) -> tuple[str, ErrorCategory]:
    if isinstance(exc, RecursionError):
        return f"the call is nested more than {MAX_DEPTH} levels deep", ErrorCategory.UNSTORABLE
    reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(":")[0]
    return f"the call is not valid JSON ({reason})", ErrorCategory.MALFORMED


def read_call(text: str) -> tuple[ReadCall, int]:
    """Read the first JSON call object ``{"name": ..., "arguments"|"parameters": {...}}`` in ``text``.

    Code fences, leading and trailing text are tolerated; the second value is the index just after the object
    (the end of ``text`` when it did not parse).
    """
    start = text.find("{")
    if start < 0:
        raw = _unfence(text).strip()
        return ReadCall(ToolCall(name="", arguments=raw), "expected a JSON object with a name and arguments"), len(text)
    try:
        obj, end = DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        problem, category = _decode_problem(exc)
        raw = _unfence(text[start:]).strip()
        return ReadCall(ToolCall(name="", arguments=raw), problem, category), len(text)
    raw = text[start:end]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ReadCall(ToolCall(name="", arguments=raw), 'the call needs a "name" string'), end
    name = name.strip()
    unstorable = json_problem(obj)
    if unstorable is not None:
        return ReadCall(ToolCall(name=name, arguments=raw), f"the call cannot be used: {unstorable}", _UNSTORABLE), end
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters", {})
    if args is None:
        args = {}
    if isinstance(args, str):
        args = _json_object(args)
        if args is None:
            return ReadCall(ToolCall(name=name, arguments=raw), "the arguments must be a JSON object"), end
    if not isinstance(args, dict):
        return ReadCall(ToolCall(name=name, arguments=raw), "the arguments must be a JSON object"), end
    return ReadCall(ToolCall(name=name, arguments=args)), end


def _json_object(text: str) -> dict | None:
    if not text.strip():
        return {}
    try:
        value = read_json(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and json_problem(value) is None else None


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
    return _on_clean_text(text, lambda cleaned: _react(cleaned, max_calls))


def _react(text: str, max_calls: int) -> Parsed:
    commands = iter_commands(text)
    first = next(commands, None)
    if first is None:
        return _malformed(text.strip(), "no command found: start each command with PLAN, APICALL or SPEAK")
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
    return _with_call_errors(Parsed(acted, tuple(calls), reply, thought, dropped=rest))


def _with_call_errors(parsed: Parsed) -> Parsed:
    bad = [c for c in parsed.calls if not c.ok]
    if not bad:
        return parsed
    return replace(parsed, error=bad[0].error, problem=bad[0].problem)


def parse_tool_calls(text: str, native: list[ToolCall] | tuple[ToolCall, ...] = (), *, max_calls: int = 3) -> Parsed:
    """Read a function-calling output: native ``tool_calls`` when the backend gave them, else ``<tool_call>``
    blocks or a bare JSON call object in the text; plain text is a reply to the user."""
    return _on_clean_text(text, lambda cleaned: _tool_calls(cleaned, native, max_calls))


def _tool_calls(text: str, native: list[ToolCall] | tuple[ToolCall, ...], max_calls: int) -> Parsed:
    if native:
        calls = tuple(_native(c) for c in native[:max_calls])
        return _with_call_errors(Parsed(text.strip(), calls))
    blocks = list(_TOOL_CALL.finditer(text))
    if blocks:
        calls = tuple(read_call(b.group(1))[0] for b in blocks[:max_calls])
        kept = blocks[: len(calls)][-1].end()
        speech = text[: blocks[0].start()].strip()
        return _with_call_errors(Parsed(speech, calls, dropped=text[kept:].strip()))
    stripped = _unfence(text).strip()
    if stripped.startswith("{"):
        call, end = read_call(stripped)
        return _with_call_errors(Parsed("", (call,), dropped=stripped[end:].strip()))
    if not stripped:
        return _malformed("", "the output was empty: call a tool or reply to the customer")
    return Parsed(text.strip(), reply=text.strip())


def _native(call: ToolCall) -> ReadCall:
    if not call.name.strip():
        return ReadCall(call, "the tool call has no function name")
    if isinstance(call.arguments, str):
        return ReadCall(call, "the tool call's arguments are not a JSON object")
    unstorable = json_problem(call.arguments)
    if unstorable is not None:
        raw = ToolCall(name=call.name, arguments=json.dumps(to_storable(call.arguments)), id=call.id)
        return ReadCall(raw, f"the tool call's arguments cannot be used: {unstorable}", _UNSTORABLE)
    return ReadCall(call)


def parse_act(text: str) -> Parsed:
    """Read one ``Action: {"name": ..., "arguments": {...}}``; the ``respond`` action speaks its ``content``."""
    return _on_clean_text(text, _act)


def _act(text: str) -> Parsed:
    match = _ACTION.search(text)
    body = text[match.end() :] if match else _unfence(text)
    if not match and not body.strip().startswith("{"):
        return _malformed(text.strip(), 'no action found: write Action: {"name": ..., "arguments": {...}}')
    read, end = read_call(body)
    acted = "Action: " + body[:end].strip()
    dropped = body[end:].strip()
    if not read.ok:
        return Parsed(acted, (read,), error=read.error, problem=read.problem, dropped=dropped)
    if read.call.name != RESPOND_ACTION:
        return Parsed(acted, (read,), dropped=dropped)
    content = read.call.arguments.get("content") if isinstance(read.call.arguments, dict) else None
    if not isinstance(content, str) or not content.strip():
        return _malformed(acted, 'the respond action needs a non-empty "content" string')
    return Parsed(acted, reply=content.strip(), dropped=dropped)
