"""Scripted warm-start data: oracle-agent conversations rewritten in a prompted agent's own protocol, as SFT rows.

A tiny model cannot follow a tool protocol zero-shot, so JOSH's beam search has nothing to harvest. A few dozen
scripted demonstrations fix that: the ``oracle`` agent (it knows the goals) talks to a rule-based user on train
tasks, and every successful conversation is rewritten turn by turn in the protocol of the agent that will be
trained (``act``, ``react`` or ``function_calling``). Each row is exactly what that agent sees at inference: its
system prompt for the task, the tools it passes to the backend (none for the text protocols), its action messages
and its result messages. Every rewritten output is read back with the agent's own parser, and a row whose output
does not read back as the same call or reply is refused, so the data can never teach a format the agent rejects.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.agents.prompting import dump
from josh.conversation import ConversationRecord, run_conversation
from josh.envs.base import Env
from josh.llm.base import Completion
from josh.types import Message, Task, ToolCall, ToolResult, system

STATS_FILE = "warmstart_stats.json"
RESPOND = "respond"


class WarmStartConfig(BaseModel):
    """Which train tasks give demonstrations and how the scripted conversations run."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    tasks: int = Field(40, ge=1, description="train tasks used (the first ones of the split, after `skip`)")
    skip: int = Field(0, ge=0, description="train tasks skipped first")
    user: str = Field("agenda", description="rule-based user simulator that talks to the oracle")
    max_turns: int = Field(15, ge=1)
    min_reward: float = Field(1.0, ge=0.0, le=1.0, description="conversations below this reward are dropped")


class WarmStartStats(BaseModel):
    """What ``warm_start`` produced (``warmstart_stats.json``)."""

    conversations: int = 0
    rows: int = 0
    below_reward: int = 0
    unrenderable: int = 0
    mean_reward: float = 0.0


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
        return f"Action: {dump({'name': RESPOND, 'arguments': {'content': reply}})}"
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


def sft_row(agent: Any, task: Task, messages: Sequence[Message]) -> dict[str, Any]:
    """One TRL conversational SFT row: the agent's system prompt, the rendered turns, the tools it passes."""
    rendered = [system(agent.system_prompt(task)), *render_messages(agent, messages)]
    return {"messages": [m.to_openai() for m in rendered], "tools": list(agent.llm_tools or [])}


async def scripted_conversations(env: Env, tasks: Sequence[Task], config: WarmStartConfig) -> list[ConversationRecord]:
    """Oracle agent + rule-based user on every task (no LLM anywhere)."""
    from josh.agents import make_agent
    from josh.users import make_user

    oracle = make_agent("oracle", env)
    user_sim = make_user(config.user, None)
    return list(
        await asyncio.gather(*(run_conversation(env, t, oracle, user_sim, max_turns=config.max_turns) for t in tasks))
    )


def warm_start(
    env: Env, tasks: Sequence[Task], agent: Any, out_dir: str | Path, config: WarmStartConfig | None = None
) -> WarmStartStats:
    """Write ``out_dir/sft.jsonl`` (and ``warmstart_stats.json``) from scripted conversations on ``tasks``."""
    config = config or WarmStartConfig()
    chosen = list(tasks)[config.skip : config.skip + config.tasks]
    if not chosen:
        raise ValueError(f"no tasks for the warm start: the split has {len(tasks)}, skip={config.skip}")
    records = asyncio.run(scripted_conversations(env, chosen, config))
    by_id = {t.id: t for t in chosen}
    stats = WarmStartStats(conversations=len(records))
    stats.mean_reward = round(sum(r.reward for r in records) / len(records), 4)
    rows = []
    for record in records:
        if record.reward < config.min_reward - 1e-9:
            stats.below_reward += 1
            continue
        try:
            rows.append(sft_row(agent, by_id[record.task_id], record.messages))
        except RenderError:
            stats.unrenderable += 1
    stats.rows = len(rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "sft.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, out / "sft.jsonl")
    (out / STATS_FILE).write_text(stats.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return stats
