"""Whole conversations as GRPO rollouts: TRL's ``rollout_func`` driven by josh's own conversation loop.

TRL's ``GRPOTrainer`` hands this function the prompts of one generation batch, each repeated ``num_generations``
times in a row; here a prompt is a task id. For every prompt josh runs one conversation exactly as ``josh eval``
does (``josh.run.conversation.run_conversation``): the environment, the user simulator, and the prompted agent (ACT,
ReACT or function-calling) generating with the policy being trained, served by josh's ``hf`` backend, so all
conversations in flight share one batched ``generate`` per step and prompt prefixes they share are computed once.
**The user simulator enters as the other party of that loop**: it answers every agent reply, ends the conversation
when it is done, and its words are context, never trained on (rule-based users need no model; an LLM user has its own
backend, never the policy). The reward is the environment's own (``env.reward``: ToolWOZ's goal reward, τ-bench's
outcome reward).

Each conversation is rendered with the training chat template as the agent saw it (system prompt, worked examples,
then the conversation) and returned as token ids: the prompt is everything before the agent's first output, the
completion everything after it up to the agent's last output, and ``env_mask`` marks the agent's own tokens (user
turns, tool results and worked examples carry no loss). TRL then computes group advantages and the GRPO loss.

Sampling is seeded: each rollout batch gets a seed from the recipe's seed, the process and the optimizer step, each
conversation its own seed from that, and each of its agent calls its own from the conversation's. The members of a
group therefore sample differently, and a run (or a resumed one) repeats its rollouts.

Nothing is truncated and nothing crashes the run. A conversation is *skipped* (reward ``None``: TRL leaves it out of
its group's baseline and gives it no advantage; all its tokens masked) and counted when it is longer than
``max_length`` tokens (``too_long``: its next prompt, or the whole conversation), when the environment raised during a
tool call (``env_error``) or on reset or scoring, when the user simulator failed (``user_error``), when the agent or
its backend failed (``agent_error``, ``llm_error``), or when the agent produced no output (``no_turn``); a batch after
which a backend is down (``josh.llm.health``: an out-of-memory ``generate`` every time, say) stops the training. A group whose
scored conversations all have the same reward (advantage 0 for all) is skipped too (``equal_groups``), when the
whole group is in this process's batch. A conversation whose prompt outgrew a model's context (the policy's backend,
or the user simulator's: ``context_length``, ``user_context_length``) ended there, as in ``josh eval``: it is scored
with the environment's reward like any other ending, and never counts toward a backend being down.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from josh.core.env import Env
from josh.core.llm import ContextLengthError, Spent, aclose_all
from josh.run.conversation import run_conversation
from josh.types import ErrorCategory, Message, Task

SKIP_REASONS = ("too_long", "env_error", "user_error", "agent_error", "llm_error", "no_turn")


@dataclass
class Trace:
    """One conversation's sampling seed (``None``: unseeded) and what went wrong in it, kept by the wrappers below."""

    seed: int | None = None
    calls: int = 0
    env_errors: list[str] = field(default_factory=list)
    too_long: bool = False

    def sampling(self, sampling: Any) -> Any:
        """``sampling`` seeded for this conversation's next call (each call its own seed), unless it has one."""
        if self.seed is None or sampling is None or sampling.seed is not None:
            return sampling
        self.calls += 1
        return sampling.model_copy(update={"seed": derive_seed(self.seed, self.calls)})


def derive_seed(*parts: int) -> int:
    """A 63-bit seed determined by ``parts``; different parts give unrelated seeds."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


_TRACE: ContextVar[Trace | None] = ContextVar("josh_grpo_trace", default=None)


class WatchedEnv:
    """The environment, with an exception inside a tool call recorded for the conversation it happened in (the
    agent still turns it into a tool error, as it always does)."""

    def __init__(self, env: Env) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def call(self, state: Any, call: Any) -> Any:
        try:
            return self._env.call(state, call)
        except Exception as exc:
            trace = _TRACE.get()
            if trace is not None:
                trace.env_errors.append(f"{type(exc).__name__}: {exc}")
            raise


class BoundedLLM:
    """The policy's backend, refusing a prompt that already fills ``max_length`` tokens (the conversation is then
    too long to train on, so generating more of it is wasted)."""

    def __init__(self, llm: Any, tokenizer: Any, max_length: int) -> None:
        self.llm, self.tokenizer, self.max_length = llm, tokenizer, max_length
        self.usage = llm.usage

    async def chat(self, messages: list[Message], *, tools: Any = None, n: int = 1, sampling: Any = None) -> Any:
        length = len(render(self.tokenizer, messages, tools, generation_prompt=True)["input_ids"])
        trace = _TRACE.get()
        if length >= self.max_length:
            if trace is not None:
                trace.too_long = True
            raise ContextLengthError(f"the conversation reached {length} tokens, max_length is {self.max_length}")
        if trace is not None:
            sampling = trace.sampling(sampling)
        return await self.llm.chat(messages, tools=tools, n=n, sampling=sampling)


def render(tokenizer: Any, messages: list[Message], tools: Any, *, generation_prompt: bool = False) -> Any:
    """Token ids (and, without ``generation_prompt``, the assistant-token mask) under the training template."""
    return tokenizer.apply_chat_template(
        [m.to_template() for m in messages],
        tools=tools or None,
        add_generation_prompt=generation_prompt,
        return_assistant_tokens_mask=not generation_prompt,
        return_dict=True,
        tokenize=True,
    )


class RolloutStats(Spent):
    """Every conversation rolled out for training, what it cost (LLM calls and tokens, agent and user) and what was
    skipped (``metrics.json``)."""

    conversations: int = 0
    trained: int = 0
    skipped: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    groups: int = 0
    equal_groups: int = 0
    reward_sum: float = 0.0
    wall_s: float = 0.0
    max_llm_calls: int | None = None
    stopped_at_budget: bool = False

    @property
    def mean_reward(self) -> float:
        scored = self.conversations - sum(self.skipped.values())
        return self.reward_sum / scored if scored else 0.0

    def line(self) -> str:
        """One line for the terminal."""
        skipped = ", ".join(f"{k} {v}" for k, v in self.skipped.items() if v) or "none"
        budget = ""
        if self.max_llm_calls is not None:
            budget = f" (budget {self.max_llm_calls:,}{', reached' if self.stopped_at_budget else ''})"
        return (
            f"rollouts: {self.conversations} conversations, mean reward {self.mean_reward:.3f}, {self.llm_calls:,} LLM "
            f"calls{budget}; skipped: {skipped}; {self.equal_groups} of {self.groups} groups had equal rewards and "
            "were skipped"
        )


@dataclass
class Encoded:
    """One rollout as GRPO trains it (or why it is skipped)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    reward: float | None
    skip: str | None = None


def encode(record: Any, trace: Trace, agent: Any, task: Task, tokenizer: Any, max_length: int) -> Encoded:
    """Token ids of a finished conversation with the agent's tokens marked, or a skipped placeholder."""
    reason = _failure(record, trace)
    if reason is None:
        prefix = agent.prompt([], task)
        head = len(render(tokenizer, prefix, agent.llm_tools)["input_ids"]) if len(prefix) > 1 else 0
        rendered = render(tokenizer, agent.prompt(record.messages, task), agent.llm_tools)
        ids, mask = list(rendered["input_ids"]), [0] * head + list(rendered["assistant_masks"])[head:]
        own = [i for i, bit in enumerate(mask) if bit]
        if not own:
            reason = "no_turn"
        elif own[-1] + 1 > max_length:
            reason = "too_long"
        else:
            start, end = own[0], own[-1] + 1
            return Encoded(ids[:start], ids[start:end], mask[start:end], float(record.reward))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return Encoded([pad], [tokenizer.eos_token_id], [0], None, reason)


def _failure(record: Any, trace: Trace) -> str | None:
    if record is None or trace.env_errors:
        return "env_error"
    if trace.too_long:
        return "too_long"
    if record.end_reason in ("user_error", "agent_error"):
        return record.end_reason
    if record.failed is not None or ErrorCategory.LLM_ERROR in record.errors:  # josh.llm.health: no result
        return "llm_error"
    return None


async def converse(
    env: Env, task: Task, agent: Any, user: Any, max_turns: int, seed: int | None = None
) -> tuple[Any, Trace]:
    """One conversation (``None`` when the environment raised outside a tool call) and what went wrong in it; with
    ``seed``, the agent's samples are seeded from it."""
    trace = Trace(seed=seed)
    _TRACE.set(trace)  # this task's own context: concurrent conversations each see their own trace
    try:
        return await run_conversation(env, task, agent, user, max_turns=max_turns), trace
    except Exception as exc:  # env.reset or env.reward raised: skip this rollout, never the run
        trace.env_errors.append(f"{type(exc).__name__}: {exc}")
        return None, trace


def mark_equal_groups(sequences: list[Encoded], keys: list[str], size: int, stats: RolloutStats) -> None:
    """Skip every complete group (``size`` consecutive rollouts of one task) whose scored rewards are all equal."""
    for start in range(0, len(sequences), size):
        group, names = sequences[start : start + size], set(keys[start : start + size])
        if len(group) < size or len(names) > 1:
            continue  # a group split across processes: TRL's own zero advantage covers it
        stats.groups += 1
        scored = [s for s in group if s.reward is not None]
        if scored and len({s.reward for s in scored}) == 1:
            stats.equal_groups += 1
            for s in scored:
                s.mask = [0] * len(s.mask)


def run_batch(coroutines: list[Any], llms: list[Any]) -> list[Any]:
    """Run the batch's conversations concurrently (their agent calls share batched generates); ``llms`` (the user
    simulator's) close their HTTP connections before the batch's event loop ends."""

    async def gather() -> list[Any]:
        try:
            return list(await asyncio.gather(*coroutines))
        finally:
            await aclose_all(llms)

    return asyncio.run(gather())


def tally(stats: RolloutStats, records: list[Any], sequences: list[Encoded], started: float) -> None:
    """Add one batch's conversations, costs and skips to ``stats``."""
    stats.conversations += len(sequences)
    for record, seq in zip(records, sequences, strict=True):
        if record is not None:
            stats.llm_calls += record.llm_calls
            stats.prompt_tokens += record.prompt_tokens
            stats.completion_tokens += record.completion_tokens
        if seq.skip is not None:
            stats.skipped[seq.skip] += 1
        else:
            stats.reward_sum += seq.reward or 0.0
            stats.trained += any(seq.mask)
    stats.wall_s += time.perf_counter() - started
