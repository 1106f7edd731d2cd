"""τ²-bench gold replay through josh's eval path, and forking a τ² state, against the deepcopy fork as the baseline.

For each domain: the ``replay`` agent with the ``tau2_scripted`` user over the base split through
``josh.eval.evaluate.evaluate`` (what ``josh eval --env tau2-<d> --split base --agent replay --user tau2_scripted``
runs), one line: tasks that scored 1.0, the average reward and seconds per task. Then on retail and airline, per task
with a gold write: the median of a fork *plus the first write on the fork* (the fork alone is O(1); the write is
where a branch pays for its own copy), ours against the old fork measured in the same run (the first write
deep-copies the whole τ² environment), and the median of the per-turn partial reward (``state.goal_reward``).
Targets (issue 39): fork and partial reward at most 10 ms at the median.

    python benchmarks/tau2_replay.py [--domains airline,retail,telecom] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import sys
import tempfile
import time
from typing import Any
from unittest import mock

from josh.agents.replay import gold_calls
from josh.envs import build_env
from josh.envs.tau2 import state as tau2_state
from josh.eval.evaluate import evaluate, load_results
from josh.run.components import ComponentOptions, build_components
from josh.types import ToolCall

TARGET_S = 10e-3
FORK_DOMAINS = ("retail", "airline")


def fork_and_write(env: Any, root: Any, call: ToolCall) -> tuple[float, Any]:
    """Seconds for a fork of ``root`` plus ``call`` (a write) on the fork, and the fork."""
    start = time.perf_counter()
    child = root.fork()
    env.call(child, call)
    return time.perf_counter() - start, child


def partial_reward_s(state: Any) -> float:
    start = time.perf_counter()
    _ = state.goal_reward
    return time.perf_counter() - start


def replay_line(domain: str, limit: int | None) -> str:
    """The gold replay of ``domain``'s base split through josh's eval, as one line."""
    options = ComponentOptions(env=f"tau2-{domain}", split="base", agent="replay", user="tau2_scripted", limit=limit)
    built = build_components(options)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = asyncio.run(evaluate(built.env, built.tasks, built.agent, built.user, out))
        wall = time.perf_counter() - start
        perfect = sum(record.reward == 1.0 for record in load_results(out))
    reward = summary.average_reward.mean
    return f"{domain} {perfect}/{summary.conversations} reward {round(reward, 3)}  {wall / summary.conversations:.2f} s/task"


def fork_lines(domain: str, limit: int | None, baseline_tasks: int) -> list[str]:
    """Medians of fork + first write (ours and the deepcopy fork) and of the partial reward on ``domain``."""
    env = build_env(f"tau2-{domain}", "default")
    tasks = [t for t in env.tasks("base") if t.goals][:limit]
    ours, deep, partial = [], [], []
    for index, task in enumerate(tasks):
        gold = gold_calls(task)
        first = next(i for i, c in enumerate(gold) if c.name in env.write_tools)
        root = env.reset(task)
        for call in gold[:first]:
            env.call(root, call)
        seconds, child = fork_and_write(env, root, gold[first])
        ours.append(seconds)
        partial.append(partial_reward_s(child))
        if index < baseline_tasks:
            with mock.patch.object(tau2_state, "branch", copy.deepcopy):  # the old fork
                deep.append(fork_and_write(env, root, gold[first])[0])
    fork_s, deep_s, partial_s = (statistics.median(xs) for xs in (ours, deep, partial))
    return [
        f"{domain} fork + first write, median of {len(ours)} tasks: {fork_s * 1e3:.1f} ms "
        f"(deepcopy {deep_s * 1e3:.0f} ms on {len(deep)}, {deep_s / fork_s:.1f}x; target <= {TARGET_S * 1e3:.0f} ms)",
        f"{domain} partial reward, median: {partial_s * 1e3:.4f} ms (target <= {TARGET_S * 1e3:.0f} ms)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default="airline,retail,telecom", help="comma-separated τ² domains")
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks per domain")
    parser.add_argument("--baseline-tasks", type=int, default=20, help="tasks timed with the slow deepcopy fork")
    opts = parser.parse_args()
    domains = [d.strip() for d in opts.domains.split(",") if d.strip()]
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    try:
        for domain in domains:
            print(replay_line(domain, opts.limit), flush=True)
        for domain in (d for d in domains if d in FORK_DOMAINS):
            for line in fork_lines(domain, opts.limit, opts.baseline_tasks):
                print(line, flush=True)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
