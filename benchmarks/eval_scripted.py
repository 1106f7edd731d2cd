"""Evaluation throughput with no LLM: the scripted oracle agent and the agenda user over 100 mini ToolWOZ tasks.

    python benchmarks/eval_scripted.py [--tasks 100] [--concurrency 16]

Prints the wall time of ``josh.eval.evaluate.evaluate`` (results.jsonl + summary.json written, as a user's run would)
against the 5 s target, and against a baseline measured in the same run: the same conversations driven one after
another with no file output, i.e. the pure cost of the env, agent and user.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from josh.eval.evaluate import evaluate
from josh.run.components import ComponentOptions, build_components
from josh.run.conversation import run_conversation


async def serial(built) -> float:
    start = time.perf_counter()
    for task in built.tasks:
        await run_conversation(built.env, task, built.agent, built.user)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    opts = parser.parse_args()
    built = build_components(ComponentOptions(split="train", agent="oracle", user="agenda", limit=opts.tasks))
    bare = asyncio.run(serial(built))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = asyncio.run(
            evaluate(built.env, built.tasks, built.agent, built.user, out, concurrency=opts.concurrency)
        )
        wall = time.perf_counter() - start
    print(f"{summary.conversations} conversations, average reward {summary.average_reward.mean:.3f}")
    print(f"josh eval (with results.jsonl, summary, bootstrap): {wall:.2f} s   (target < 5 s: {5 / wall:.1f}x margin)")
    print(f"bare conversations, serial, no output:             {bare:.2f} s   (eval overhead {wall / bare:.2f}x)")


if __name__ == "__main__":
    main()
