"""Gold replay over every airline task, and forking a conversation, against τ-bench-style baselines.

Ours: the database is loaded once; each task replays on a fresh copy-on-write state (and hashes its final data),
each fork copies two small overlay mappings. Baselines measured in the same run: reload the three JSON
files on every reset (what τ-bench does, on a sample of tasks because it is slow), and ``copy.deepcopy`` of the
whole database per fork (what the JOSH reference does per branch). Target: at most 5 ms per task.

    python benchmarks/airline_replay.py [DATA_DIR]
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from pathlib import Path

from josh.envs.airline import AirlineDB, AirlineEnv, AirlineState, details_of
from josh.types import Task

SAMPLE = 5
ROUNDS = 5


def reload_db(data_dir: Path, policy: str) -> AirlineDB:
    """The three JSON files read again, as τ-bench does on every reset (no checks, just the indexes)."""
    users, reservations, flights = (
        json.loads((data_dir / f"{n}.json").read_text()) for n in ("users", "reservations", "flights")
    )
    return AirlineDB.build(users, reservations, flights, policy)


def replay(env: AirlineEnv, task: Task, state: AirlineState) -> str:
    for call in details_of(task).gold_calls():
        env.call(state, call)
    return state.data_hash()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(data_dir: Path) -> None:
    env = AirlineEnv(data_dir)
    tasks = env.tasks("test")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    best = min(timed(lambda: [replay(env, t, env.reset(t)) for t in tasks]) for _ in range(ROUNDS))
    sample = tasks[:SAMPLE]
    reload = timed(lambda: [replay(env, t, AirlineState(t, reload_db(data_dir, env.db.policy))) for t in sample])
    per_ours, per_reload = best / len(tasks), reload / len(sample)
    print(
        f"gold replay, all {len(tasks)} tasks (best of {ROUNDS}): {best * 1e3:.1f} ms "
        f"({per_ours * 1e3:.2f} ms/task; target <= 5 ms: {5e-3 / per_ours:.0f}x margin)"
    )
    print(
        f"baseline reload-per-reset on {len(sample)} tasks: {per_reload * 1e3:.0f} ms/task  -> {per_reload / per_ours:.0f}x"
    )

    root = env.gold_state(tasks[8])
    forks = 5000
    fork_s = timed(lambda: [root.fork() for _ in range(forks)]) / forks
    copies = 3
    data = {"users": env.db.users, "reservations": env.db.reservations, "flights": env.db.flights}
    deep_s = timed(lambda: [copy.deepcopy(data) for _ in range(copies)]) / copies
    print(
        f"fork: {fork_s * 1e6:.1f} us; baseline deepcopy of the database: {deep_s * 1e3:.0f} ms  -> {deep_s / fork_s:.0f}x"
    )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main(
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/data/taubench/airline"
    )
