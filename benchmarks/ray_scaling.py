"""Rollout throughput on Ray: 2 actors vs 1, each actor standing for one GPU engine of fixed capacity.

Every actor builds the latency-simulating scripted agent and user of ``search_scheduling.py`` (50 ms per request by
default). An actor is given a bounded capacity, as a real engine has: at most ``--llm-slots`` requests in flight
(the scripted backend's ``max_concurrency``) and ``--concurrency`` tasks in flight. Without such a bound a single
asyncio actor would overlap every request's latency by itself and a second actor could not help; with it, one actor
is the bottleneck, as one GPU is, and two actors should serve about twice the tasks per second.

Timed: the dispatch of all tasks over ready actors (``ActorPool.run``, the code ``josh rollout --ray`` uses), from
the first task handed out to the last tree back; actor start-up is reported separately. For reference the same work
also runs in one process without Ray (``run_rollouts``) under the same per-engine limits.

Target: 2 actors >= 1.7 x the tasks/s of 1 actor.

    python benchmarks/ray_scaling.py [--tasks 64] [--latency 0.05] [--llm-slots 8] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray import cloudpickle

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_scheduling  # noqa: E402
from search_scheduling import BenchAgent, BenchUser, PlainEnv, make_tasks  # noqa: E402

from josh.llm.scripted import ScriptedLLM  # noqa: E402
from josh.run.components import ComponentOptions, Components  # noqa: E402
from josh.search.algorithm import SearchConfig  # noqa: E402
from josh.search.distributed import ActorPool, RayOptions  # noqa: E402
from josh.search.rollout import RolloutConfig, run_rollouts  # noqa: E402
from josh.types import Task  # noqa: E402

# the actors unpickle the benchmark pieces by value: benchmarks/ is not an installed package
cloudpickle.register_pickle_by_value(search_scheduling)


def bench_components(options: ComponentOptions, latency: float, llm_slots: int, goal_chance: float) -> Components:
    """One engine's worth of work: a scripted backend with ``llm_slots`` requests in flight at most."""
    llm = ScriptedLLM(search_scheduling._policy, latency_s=latency, max_concurrency=llm_slots)
    agent, user = BenchAgent(llm, goal_chance), BenchUser(llm)
    return Components(env=PlainEnv(), tasks=[], agent=agent, user=user, llms=[llm])  # type: ignore[arg-type]


def on_ray(tasks: list[Task], actors: int, search: SearchConfig, per_actor: int, factory) -> tuple[float, float, int]:
    """(start-up seconds, dispatch seconds, trees) with ``actors`` actors."""
    start = time.perf_counter()
    pool = ActorPool(ray, RayOptions(actors=actors, cpus_per_actor=0.5), ComponentOptions(), search, factory)
    pool.wait_ready()
    ready = time.perf_counter()
    trees = sum(1 for _ in pool.run(tasks, per_actor))
    done = time.perf_counter()
    pool.close()
    return ready - start, done - ready, trees


def in_process(tasks: list[Task], search: SearchConfig, per_actor: int, factory) -> float:
    built = factory(ComponentOptions())
    config = RolloutConfig(search=search, concurrency=per_actor)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        asyncio.run(run_rollouts(tasks, built.env, built.agent, built.user, out, config, progress=False))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="simulated seconds per LLM request")
    parser.add_argument("--llm-slots", type=int, default=8, help="requests in flight per actor (its engine)")
    parser.add_argument("--concurrency", type=int, default=4, help="tasks in flight per actor")
    parser.add_argument("--beam", type=int, default=2)
    parser.add_argument("--branching", type=int, default=2)
    parser.add_argument("--max-depth", type=int, default=4)
    parser.add_argument("--goal-chance", type=float, default=0.1)
    args = parser.parse_args()
    tasks = make_tasks(args.tasks)
    search = SearchConfig(max_beam=args.beam, branching=args.branching, max_depth=args.max_depth)
    factory = functools.partial(
        bench_components, latency=args.latency, llm_slots=args.llm_slots, goal_chance=args.goal_chance
    )
    print(
        f"{len(tasks)} tasks, beam {args.beam}, branching {args.branching}, depth {args.max_depth}, "
        f"{args.latency * 1000:.0f} ms per request; per actor: {args.llm_slots} requests and "
        f"{args.concurrency} tasks in flight (one engine's capacity, so one actor is the bottleneck)"
    )
    local = in_process(tasks, search, args.concurrency, factory)
    print(f"one process, no Ray        {local:7.2f} s   {len(tasks) / local:6.2f} tasks/s")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rates = {}
        for actors in (1, 2):
            startup, wall, trees = on_ray(tasks, actors, search, args.concurrency, factory)
            rates[actors] = trees / wall
            print(
                f"Ray, {actors} actor{'s' if actors > 1 else ' '}              {wall:7.2f} s   {rates[actors]:6.2f} tasks/s"
                f"   (actor start-up {startup:.1f} s, not timed; {trees} trees)"
            )
    finally:
        ray.shutdown()
    print(f"2 actors / 1 actor: {rates[2] / rates[1]:.2f}x  (target >= 1.7)")


if __name__ == "__main__":
    main()
