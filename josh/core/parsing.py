"""What the protocols' readers share: the ``Parsed`` result, the JSON call reader, and storability repairs.

Every reader (``parse_react``, ``parse_act`` in the protocol modules, and ``parse_tool_calls`` here: the
function-calling protocol's, which the user simulators' device calls share) is a pure function that
never raises: whatever the model wrote (half a JSON object, garbage, an empty string, endless text), the answer is a
``Parsed`` whose ``error`` says ``ErrorCategory.MALFORMED`` when nothing usable came out, with a ``problem``
sentence the agent can be shown as corrective feedback.

Whatever a reader returns can be stored: lone surrogates in the text are replaced by U+FFFD (``repaired`` is set),
and a call whose JSON cannot be stored (a surrogate escape, nesting past ``MAX_DEPTH``) is refused with
``ErrorCategory.UNSTORABLE``. Numbers Python will not read (over 4,300 digits, ``NaN``) make the JSON malformed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from josh.types import ErrorCategory, ToolCall
from josh.util.storable import DECODER, MAX_DEPTH, clean_text, json_problem, read_json, to_storable

_UNSTORABLE = ErrorCategory.UNSTORABLE
_FENCE = re.compile(r"```[A-Za-z0-9_-]*")


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

    def with_ids(self, ids: Sequence[str]) -> Parsed:
        """The same reading with its calls' ids replaced by ``ids``, in order (the reader's own are random or the
        server's; see ``josh.types.call_id``)."""
        if len(ids) != len(self.calls):
            raise ValueError(f"{len(ids)} ids for {len(self.calls)} calls")
        calls = tuple(
            replace(read, call=read.call.model_copy(update={"id": i})) for read, i in zip(self.calls, ids, strict=True)
        )
        return replace(self, calls=calls)


def malformed(text: str, problem: str) -> Parsed:
    return Parsed(text=text, error=ErrorCategory.MALFORMED, problem=problem)


def unfence(text: str) -> str:
    return _FENCE.sub("", text)


def on_clean_text(text: str, read: Callable[[str], Parsed]) -> Parsed:
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
        raw = unfence(text).strip()
        return ReadCall(ToolCall(name="", arguments=raw), "expected a JSON object with a name and arguments"), len(text)
    try:
        obj, end = DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        problem, category = _decode_problem(exc)
        raw = unfence(text[start:]).strip()
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


def with_call_errors(parsed: Parsed) -> Parsed:
    bad = [c for c in parsed.calls if not c.ok]
    if not bad:
        return parsed
    return replace(parsed, error=bad[0].error, problem=bad[0].problem)


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
