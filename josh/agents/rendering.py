"""Writing canonical messages (OpenAI-style tool calls, tool results, plain replies) in a prompted agent's own
protocol, read back with the agent's parser so that nothing is written that the agent would read differently.

Used for the scripted warm start's demonstrations and for worked examples given as earlier chat turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from josh.agents.parsing import RESPOND_ACTION
from josh.agents.prompting import dump
from josh.llm.base import Completion
from josh.types import Message, ToolCall, ToolResult


class RenderError(ValueError):
    """An oracle message has no faithful rendering in the agent's protocol."""


def _call_text(protocol: str, calls: Sequence[ToolCall]) -> list[str]:
    """The agent outputs that make ``calls`` (act: one call per output; the others: all in one output)."""
    if protocol == "act":
        return [f"Action: {dump({'name': c.name, 'arguments': c.arguments})}" for c in calls]
    if protocol == "react":
        return [" ".join(f"APICALL {dump({'name': c.name, 'parameters': c.arguments})} <COMMAND_END>" for c in calls)]
    if protocol == "function_calling":
        body = "\n".join(
            f"<tool_call>\n{dump({'name': c.name, 'arguments': c.arguments})}\n</tool_call>" for c in calls
        )
        return [body]
    raise RenderError(f"no warm-start rendering for the {protocol!r} protocol (act, react or function_calling)")


def _reply_text(protocol: str, reply: str) -> str:
    if protocol == "act":
        return f"Action: {dump({'name': RESPOND_ACTION, 'arguments': {'content': reply}})}"
    if protocol == "react":
        return f"SPEAK {reply} <COMMAND_END>"
    if protocol == "function_calling":
        return reply
    raise RenderError(f"no warm-start rendering for the {protocol!r} protocol (act, react or function_calling)")


def _same_calls(read: Sequence[Any], wanted: Sequence[ToolCall]) -> bool:
    got = [(r.call.name, r.call.arguments) for r in read if r.ok]
    return len(got) == len(read) and got == [(c.name, c.arguments) for c in wanted]


def render_messages(agent: Any, messages: Sequence[Message]) -> list[Message]:
    """Rewrite an oracle conversation (user, assistant tool calls, tool results, replies) in ``agent``'s protocol.

    ``agent`` is a prompted agent (``josh.agents.loop.LoopAgent``); its ``read`` must give back every call and
    reply, else ``RenderError``."""
    protocol = agent.protocol
    results = {m.tool_call_id: m.content or "" for m in messages if m.role == "tool"}
    out: list[Message] = []
    for message in messages:
        if message.role == "user":
            out.append(message)
        elif message.role == "assistant" and message.tool_calls:
            calls = list(message.tool_calls)
            texts = _call_text(protocol, calls)
            groups = [[c] for c in calls] if len(texts) > 1 else [calls]
            for text, group in zip(texts, groups, strict=True):
                parsed = agent.read(Completion(text=text))
                if not _same_calls(parsed.calls, group):
                    raise RenderError(f"the {protocol} agent reads {text!r} differently")
                out.append(agent.action_message(parsed))
                found = [ToolResult(content=results.get(c.id, "")) for c in group]
                out.extend(agent.result_messages([r.call for r in parsed.calls], found))
        elif message.role == "assistant" and message.content:
            parsed = agent.read(Completion(text=_reply_text(protocol, message.content)))
            if parsed.reply != message.content.strip() or parsed.calls:
                raise RenderError(f"the {protocol} agent reads the reply {message.content!r} differently")
            out.append(agent.action_message(parsed))
    return out
