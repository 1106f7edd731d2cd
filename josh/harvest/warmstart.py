"""Scripted warm-start data: scripted-agent conversations rewritten in a prompted agent's own protocol, as SFT rows.

A tiny model cannot follow a tool protocol zero-shot, so JOSH's beam search has nothing to harvest. A few dozen
scripted demonstrations fix that: a scripted agent that knows the answer (``oracle`` on ToolWOZ, ``replay`` of the
gold calls on the τ-bench and τ² envs) talks to a rule-based user on train tasks, and every successful conversation
is rewritten turn by turn in the protocol of the agent that will be trained (any registered protocol:
``AgentProtocol.render``). Each row is exactly what that agent sees at
inference: its system prompt for the task, the tools it passes to the backend (none for the text protocols), its
action messages and its result messages. Every rewritten output is read back with the protocol's own parser, and a
row whose output does not read back as the same call or reply is refused, so the data can never teach a format the
agent rejects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.agents import AGENTS
from josh.agents.prompted import AgentPrompt
from josh.agents.protocol import RenderError
from josh.core.env import Env
from josh.harvest.trl_rows import trl_messages
from josh.run.components import build_agent, build_user
from josh.run.conversation import ConversationRecord, run_conversation
from josh.types import Message, Task, system
from josh.users import USERS
from josh.util.atomic import write_atomic
from josh.util.layout import WARMSTART_ROWS as ROWS_FILE
from josh.util.layout import WARMSTART_STATS as STATS_FILE


class WarmStartConfig(BaseModel):
    """Which train tasks give demonstrations and how the scripted conversations run."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    tasks: int = Field(40, ge=1, description="train tasks used (the first ones of the split, after `skip`)")
    skip: int = Field(0, ge=0, description="train tasks skipped first")
    agent: str = Field(
        "oracle", description="scripted agent that demonstrates: oracle (ToolWOZ) or replay (gold calls, any env)"
    )
    user: str = Field("agenda", description="rule-based user simulator that talks to the scripted agent")
    max_turns: int = Field(15, ge=1)
    min_reward: float = Field(1.0, ge=0.0, le=1.0, description="conversations below this reward are dropped")
    epochs: float | None = Field(
        None,
        gt=0,
        description="training epochs of the warm-start adapter and of control-retrain (default: the sft recipe's); "
        "a handful of demonstrations needs more passes to reach as many optimizer steps",
    )


class WarmStartStats(BaseModel):
    """What ``warm_start`` produced (``warmstart_stats.json``)."""

    conversations: int = 0
    rows: int = 0
    below_reward: int = 0
    unrenderable: int = 0
    mean_reward: float = 0.0


def sft_row(prompt: AgentPrompt, task: Task, messages: Sequence[Message]) -> dict[str, Any]:
    """One TRL conversational SFT row: the agent's system prompt and preamble, the turns rendered in its protocol,
    the tools it passes to the backend."""
    frame = prompt.frame(task)
    rendered = [system(frame.system or ""), *frame.preamble, *prompt.render(list(messages))]
    return {"messages": trl_messages(rendered), "tools": frame.tools}


async def scripted_conversations(env: Env, tasks: Sequence[Task], config: WarmStartConfig) -> list[ConversationRecord]:
    """The scripted agent + rule-based user on every task (no LLM anywhere); ``ValueError`` when either does not
    run on ``env``."""
    AGENTS.check(config.agent, env=env.name)
    USERS.check(config.user, env=env.name)
    scripted = build_agent(env, config.agent, None, {})
    user_sim = build_user(env, config.user, None, {})
    return list(
        await asyncio.gather(*(run_conversation(env, t, scripted, user_sim, max_turns=config.max_turns) for t in tasks))
    )


def warm_start(
    env: Env, tasks: Sequence[Task], prompt: AgentPrompt, out_dir: str | Path, config: WarmStartConfig | None = None
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
            rows.append(sft_row(prompt, by_id[record.task_id], record.messages))
        except RenderError:
            stats.unrenderable += 1
    stats.rows = len(rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / ROWS_FILE, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    write_atomic(out / STATS_FILE, stats.model_dump_json(indent=2) + "\n")
    return stats
