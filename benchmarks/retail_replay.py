"""Gold replay over every retail task, and forking a conversation, against τ-bench-style baselines.

Ours: the database is loaded once; each task replays on a fresh copy-on-write state, each fork copies two small
overlay mappings. Baselines (measured in the same run, on a sample of tasks because they are slow): reload the
three JSON files on every reset (what τ-bench does), and ``copy.deepcopy`` of the whole database per fork (what the
JOSH reference does per branch).

    python benchmarks/retail_replay.py [DATA_DIR]
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

from josh.envs.retail import RetailDB, RetailEnv, RetailState, details_of
from josh.envs.retail.db import RetailDataError
from josh.types import Task

SAMPLE = 40


def reload_db(data_dir: Path, policy: str) -> RetailDB:
    users, orders, products = (
        json.loads((data_dir / f"{n}.json").read_text()) for n in ("users", "orders", "products")
    )
    return RetailDB.build(users, orders, products, policy)


def replay(env: RetailEnv, task: Task, state: RetailState) -> str:
    for call in details_of(task).gold_calls():
        env.call(state, call)
    return state.data_hash()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(data_dir: Path) -> None:
    env = RetailEnv(data_dir)
    tasks = [t for split in ("train", "dev", "test") for t in env.tasks(split)]
    sample = tasks[:: max(1, len(tasks) // SAMPLE)][:SAMPLE]

    ours = timed(lambda: [replay(env, t, env.reset(t)) for t in tasks])
    reload = timed(lambda: [replay(env, t, RetailState(t, reload_db(env.data_dir, env.db.policy))) for t in sample])
    per_ours, per_reload = ours / len(tasks), reload / len(sample)
    print(f"gold replay, all {len(tasks)} tasks: {ours:.3f} s ({per_ours * 1e3:.2f} ms/task)")
    print(
        f"baseline reload-per-reset on {len(sample)} tasks: {per_reload * 1e3:.1f} ms/task  -> {per_reload / per_ours:.0f}x"
    )

    root = env.gold_state(tasks[0])
    forks = 2000
    fork_s = timed(lambda: [root.fork() for _ in range(forks)]) / forks
    copies = 5
    data = {"users": env.db.users, "orders": env.db.orders, "products": env.db.products}
    deep_s = timed(lambda: [copy.deepcopy(data) for _ in range(copies)]) / copies
    print(
        f"fork: {fork_s * 1e6:.1f} us; baseline deepcopy of the database: {deep_s * 1e3:.1f} ms  -> {deep_s / fork_s:.0f}x"
    )


if __name__ == "__main__":
    folder = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/data/taubench/retail"
    )
    try:
        main(folder)
    except RetailDataError as exc:
        sys.exit(f"error: {exc}")
