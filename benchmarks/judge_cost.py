"""What the turn-level judge adds to an evaluation: the scripted oracle agent and the agenda user over mini ToolWOZ
tasks (``josh eval``), then every reply judged (``josh judge``) by a scripted judge with a simulated latency per
request, or by SmolLM2 on this machine.

    python benchmarks/judge_cost.py [--tasks 20] [--judge scripted|smollm2] [--latency 0.05] [--quick]

Prints the judge's calls, seconds per judged turn and its share of the evaluation's wall time (evaluation plus
judging), each with the load average (``os.getloadavg``, 1 minute) read right after it was measured: on a shared
machine a high load explains a slow figure. ``--quick`` is the smoke test: 3 tasks, a scripted judge with no latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

GOOD = json.dumps({n: {"score": 4, "why": "fine"} for n in ("cohesion", "backend", "policy")})


def load() -> str:
    """The 1-minute load average and the cores, as printed beside each figure."""
    return f"(load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)"


def judge_spec(kind: str, latency: float):
    from josh.eval.judge.session import JudgeSpec

    if kind == "smollm2":
        return JudgeSpec(backend="hf", model="smollm2", llm_options={"dtype": "float32"})
    return JudgeSpec(backend="scripted", model="judge", llm_options={"replies": [GOOD], "latency_s": latency})


def measure(tasks: int, kind: str, latency: float, out: Path) -> dict[str, float]:
    """Evaluate, then judge; the figures the benchmark prints."""
    from josh.eval.evaluate import evaluate
    from josh.eval.judge.session import judge_folder
    from josh.run.components import ComponentOptions, build_components

    built = build_components(ComponentOptions(split="test", agent="oracle", user="agenda", limit=tasks))
    start = time.perf_counter()
    summary = asyncio.run(evaluate(built.env, built.tasks, built.agent, built.user, out, concurrency=16))
    eval_s = time.perf_counter() - start
    eval_load = os.getloadavg()[0]
    start = time.perf_counter()
    judged = judge_folder(out, judge_spec(kind, latency), built.env)
    judge_s = time.perf_counter() - start
    return {
        "conversations": summary.conversations,
        "eval_s": eval_s,
        "eval_load": eval_load,
        "replies": judged.replies,
        "failed": judged.failed,
        "calls": judged.llm_calls,
        "judge_s": judge_s,
        "judge_load": os.getloadavg()[0],
    }


def report(figures: dict[str, float], kind: str) -> None:
    per_turn = figures["judge_s"] / max(1, figures["replies"])
    share = figures["judge_s"] / (figures["eval_s"] + figures["judge_s"])
    print(f"judge {kind}: {figures['conversations']:.0f} conversations, {figures['replies']:.0f} replies judged "
          f"({figures['failed']:.0f} failed)")  # fmt: skip
    print(f"evaluation wall time:   {figures['eval_s']:.2f} s   (load {figures['eval_load']:.2f})")
    print(
        f"judge LLM calls:        {figures['calls']:.0f}   ({figures['calls'] / max(1, figures['replies']):.2f} per turn)"
    )
    print(f"judge seconds per turn: {per_turn:.3f} s   (load {figures['judge_load']:.2f})")
    print(f"judge share of wall:    {share:.1%} of evaluation + judging   {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--judge", choices=["scripted", "smollm2"], default="scripted")
    parser.add_argument("--latency", type=float, default=0.05, help="scripted judge: seconds per request")
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 tasks, scripted judge, no latency")
    opts = parser.parse_args()
    if opts.quick:
        opts.tasks, opts.judge, opts.latency = 3, "scripted", 0.0
    with tempfile.TemporaryDirectory() as out:
        report(measure(opts.tasks, opts.judge, opts.latency, Path(out)), opts.judge)


if __name__ == "__main__":
    main()
