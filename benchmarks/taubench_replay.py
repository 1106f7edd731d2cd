"""Gold replay over every task of a τ-bench domain, and forking a conversation, against τ-bench-style baselines.

Ours: the database is loaded once; each task replays on a fresh copy-on-write state (and hashes its final data),
each fork copies the small overlay mappings. Baselines measured in the same run, on a sample of tasks because they
are slow: reload the domain's JSON files on every reset (what τ-bench does), and ``copy.deepcopy`` of the whole
database per fork (what the JOSH reference does per branch). Airline target: at most 5 ms per task.

    python benchmarks/taubench_replay.py retail|airline [DATA_DIR]
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from josh.envs.airline import AirlineEnv
from josh.envs.retail import RetailEnv
from josh.envs.taubench import TauBenchEnv, details_of
from josh.envs.taubench.state import OverlayState
from josh.types import Task


@dataclass(frozen=True)
class Domain:
    """How one domain is measured: its env and database tables (in ``build`` order), splits, baseline sample,
    replay rounds and fork counts."""

    env: type[TauBenchEnv]
    tables: tuple[str, ...]
    splits: tuple[str, ...]
    sample: int
    rounds: int
    fork_task: int
    forks: int
    copies: int
    target_s: float | None = None


DOMAINS = {
    "retail": Domain(
        RetailEnv, ("users", "orders", "products"), ("train", "dev", "test"), 40, 1, fork_task=0, forks=2000, copies=5
    ),
    "airline": Domain(
        AirlineEnv, ("users", "reservations", "flights"), ("test",), 5, 5, 8, 5000, copies=3, target_s=5e-3
    ),
}


def reload_db(env: TauBenchEnv, tables: tuple[str, ...]) -> Any:
    """The domain's JSON files read again, as τ-bench does on every reset (no checks, just the indexes)."""
    records = (json.loads((env.data_dir / f"{table}.json").read_text()) for table in tables)
    return type(env.db).build(*records, env.db.policy)


def replay(env: TauBenchEnv, task: Task, state: OverlayState) -> str:
    for call in details_of(task).gold_calls():
        env.call(state, call)
    return state.data_hash()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(name: str, data_dir: Path) -> None:
    domain = DOMAINS[name]
    env = domain.env(data_dir)
    tasks = [t for split in domain.splits for t in env.tasks(split)]
    sample = tasks[:: max(1, len(tasks) // domain.sample)][: domain.sample]
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    best = min(timed(lambda: [replay(env, t, env.reset(t)) for t in tasks]) for _ in range(domain.rounds))
    reload = timed(lambda: [replay(env, t, env.state_type(t, reload_db(env, domain.tables))) for t in sample])
    per_ours, per_reload = best / len(tasks), reload / len(sample)
    margin = (
        f"; target <= {domain.target_s * 1e3:.0f} ms: {domain.target_s / per_ours:.0f}x margin"
        if domain.target_s
        else ""
    )
    print(
        f"{name} gold replay, all {len(tasks)} tasks (best of {domain.rounds}): {best * 1e3:.1f} ms "
        f"({per_ours * 1e3:.2f} ms/task{margin})"
    )
    print(
        f"baseline reload-per-reset on {len(sample)} tasks: {per_reload * 1e3:.1f} ms/task  -> {per_reload / per_ours:.0f}x"
    )
    root = env.gold_state(tasks[domain.fork_task])
    fork_s = timed(lambda: [root.fork() for _ in range(domain.forks)]) / domain.forks
    data = {table: getattr(env.db, table) for table in domain.tables}
    deep_s = timed(lambda: [copy.deepcopy(data) for _ in range(domain.copies)]) / domain.copies
    print(
        f"fork: {fork_s * 1e6:.1f} us; baseline deepcopy of the database: {deep_s * 1e3:.0f} ms  -> {deep_s / fork_s:.0f}x"
    )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in DOMAINS:
        sys.exit("usage: python benchmarks/taubench_replay.py retail|airline [DATA_DIR]")
    domain_name = sys.argv[1]
    shared = Path(__file__).resolve().parents[2] / "shared/data/taubench" / domain_name
    try:
        main(domain_name, Path(sys.argv[2]) if len(sys.argv) > 2 else shared)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
