"""τ²'s final reward as josh scores it (τ²'s evaluator on environments over one pristine load,
``josh.envs.tau2.fresh``) against τ²'s evaluator on its own registered constructor (two database loads per
conversation), on the same gold-replay trajectories, in the same run; the two rewards must agree on every task.

    python benchmarks/tau2_reward.py [--domains airline,retail,telecom] [--limit N]

Prints, per domain, the median seconds per scored conversation for both, their ratio, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from josh.agents.replay import final_reply, gold_calls
from josh.envs import build_env
from josh.envs.tau2.trajectory import evaluate, simulation, to_trajectory, without_nl_assertions
from josh.types import Message, assistant, tool_result, user


def gold_conversation(env: Any, task: Any) -> tuple[Any, list[Message]]:
    """The task's gold agent calls on josh's environment, then the gold closing reply."""
    state = env.reset(task)
    messages = [user("Hi, I need help.")]
    for call in gold_calls(task):
        result = env.call(state, call)
        messages += [assistant(calls=[call]), tool_result(call.id, result.content)]
    messages.append(assistant(final_reply(task)))
    return state, messages


def tau2_own(domain: str, tau2_task: Any, trajectory: list[Any]) -> Any:
    """τ²'s ``evaluate_simulation`` with the domain's registered constructor (no josh in between)."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    run = simulation(tau2_task, trajectory)
    return evaluate_simulation(run, without_nl_assertions(tau2_task), EvaluationType.ALL, False, domain)


def timed(function: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function(*args)
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", default="airline,retail,telecom")
    parser.add_argument("--limit", type=int, default=20, help="tasks per domain (base split, in order)")
    args = parser.parse_args()
    for domain in args.domains.split(","):
        env = build_env(f"tau2-{domain}", "default")
        ours, theirs = [], []
        for task in env.tasks("base")[: args.limit]:
            state, messages = gold_conversation(env, task)
            trajectory = to_trajectory(messages, state.calls)
            tau2_task = env.tau2_task(task)
            ours_s, ours_info = timed(evaluate, domain, tau2_task, trajectory)
            theirs_s, theirs_info = timed(tau2_own, domain, tau2_task, trajectory)
            if ours_info.reward != theirs_info.reward:
                raise SystemExit(f"{domain} {task.id}: josh {ours_info.reward} != τ² {theirs_info.reward}")
            ours.append(ours_s)
            theirs.append(theirs_s)
        mine, base = statistics.median(ours[1:] or ours), statistics.median(theirs[1:] or theirs)
        print(
            f"{domain}: {len(ours)} tasks, rewards equal; josh {mine * 1e3:.1f} ms, τ²'s constructor "
            f"{base * 1e3:.1f} ms per conversation (median after the first): {base / mine:.1f}x; "
            f"load {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
