"""Prefix caching in the ``hf`` backend on an agent workload: SmolLM2 on CPU, the ACT agent's real system prompt.

Sixteen conversations (the first user turns of mini test tasks, all under the same ~600-token ACT system prompt) are
served concurrently, then each is sampled ``n=4`` times the way a JOSH search expands a leaf. Each workload runs
with the prefix cache off (``prefix_cache_tokens=0``) and on, alternating, on the same loaded model. Prints prompt
tokens per second, wall time and the ratio.

    python benchmarks/prefix_cache.py [--rounds 2] [--max-new-tokens 24]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import torch

from josh.agents import make_agent
from josh.core.llm import Sampling
from josh.llm.factory import make_llm
from josh.llm.hf import HFLLM
from josh.run.components import build_env
from josh.types import Message, user


def conversations(count: int) -> list[list[Message]]:
    """The ACT agent's prompt over a first user turn (the original one, else the goal text) of mini test tasks."""
    env = build_env("toolwoz", "mini")
    agent = make_agent("act", env, make_llm("scripted", replies=["unused: only the prompt is asked for"]), examples=0)
    chats = []
    for task in env.tasks("test")[:count]:
        opening = next((m.content for m in task.transcript if m.role == "user"), task.user_goal)
        chats.append(agent.prompt([user(opening or "Hello.")], task))
    return chats


async def serve(llm: HFLLM, batch: list[list[Message]], n: int, sampling: Sampling) -> tuple[int, float]:
    start = time.perf_counter()
    replies = await asyncio.gather(*(llm.chat(c, n=n, sampling=sampling) for c in batch))
    prompt_tokens = sum(c.prompt_tokens for r in replies for c in r)
    return prompt_tokens * n, time.perf_counter() - start


async def main(rounds: int, max_new_tokens: int) -> None:
    cached = HFLLM("smollm2", max_batch_size=64)
    plain = HFLLM(net=cached.net, tokenizer=cached.tokenizer, max_batch_size=64, prefix_cache_tokens=0)
    batch = conversations(16)
    sampling = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=max_new_tokens, seed=0)
    workloads = {"16 conversations, n=1": (batch, 1), "4 conversations, n=4": (batch[:4], 4)}
    print(
        f"SmolLM2-135M-Instruct on CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
        f"load average {os.getloadavg()[0]:.1f}; {rounds} rounds, max_new_tokens={max_new_tokens}"
    )
    for name, (convs, n) in workloads.items():
        totals = {"off": [0, 0.0], "on": [0, 0.0]}
        for _ in range(rounds):
            for mode, llm in (("off", plain), ("on", cached)):
                tokens, seconds = await serve(llm, convs, n, sampling)
                totals[mode][0] += tokens
                totals[mode][1] += seconds
        off, on = totals["off"][1], totals["on"][1]
        print(f"{name}: prompt rows {totals['on'][0] // rounds} tokens; cache off {off:.1f}s, on {on:.1f}s")
        print(f"  speed-up: {off / on:.2f}x")
    cached.close()
    plain.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.max_new_tokens))
