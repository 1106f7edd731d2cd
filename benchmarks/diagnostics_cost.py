"""What per-call diagnostics add to an evaluation: ``benchmarks/eval_scripted.py``'s workload (the scripted oracle
agent and the agenda user over 100 mini ToolWOZ tasks, results.jsonl and summary.json written) with diagnostics,
against the same run with them switched off, measured in the same process. Target: at most 5% more time.

    .venv/bin/python benchmarks/diagnostics_cost.py [--tasks 100] [--rounds 7]

Three figures, best of ``rounds`` interleaved runs each: the CPU-time ratio of whole evaluations (this process's
CPU time, so other programs on a shared machine barely move it), the same for wall time (noisy there), and the time
spent inside the diagnostics themselves (classifying every call, reading the replies for false claims, adding up the
summary) as a share of an evaluation's CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from contextlib import contextmanager
from unittest import mock

from josh.eval import metrics
from josh.eval.evaluate import evaluate
from josh.run import conversation
from josh.run.components import ComponentOptions, build_components


class Timed:
    """Wraps a function and adds up the CPU time spent in it."""

    def __init__(self, fn) -> None:
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *args, **kwargs):
        start = time.process_time()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.process_time() - start


@contextmanager
def switched(on: bool, diagnose: Timed, summarize: Timed):
    """Diagnostics as shipped (timed), or switched off (no verdicts, no summary)."""
    with (
        mock.patch.object(conversation, "diagnose_conversation", diagnose if on else lambda *a, **k: None),
        mock.patch.object(metrics, "summarize_diagnoses", summarize if on else lambda *a, **k: None),
    ):
        yield


def run_once(built, concurrency: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one evaluation."""
    with tempfile.TemporaryDirectory() as out:
        cpu, wall = time.process_time(), time.perf_counter()
        asyncio.run(evaluate(built.env, built.tasks, built.agent, built.user, out, concurrency=concurrency))
        return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=16)
    opts = parser.parse_args()
    built = build_components(ComponentOptions(split="train", agent="oracle", user="agenda", limit=opts.tasks))
    diagnose, summarize = Timed(conversation.diagnose_conversation), Timed(metrics.summarize_diagnoses)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(opts.rounds):
        for on in (False, True):
            with switched(on, diagnose, summarize):
                runs[on].append(run_once(built, opts.concurrency))
    inside = (diagnose.seconds + summarize.seconds) / opts.rounds
    print(f"{len(built.tasks)} conversations per evaluation, best of {opts.rounds} interleaved runs each")
    for index, kind in ((0, "CPU "), (1, "wall")):
        off, on = min(r[index] for r in runs[False]), min(r[index] for r in runs[True])
        print(f"{kind} time without diagnostics: {off:.3f} s   with: {on:.3f} s   -> {100 * (on / off - 1):+.1f}%")
    off = min(r[0] for r in runs[False])
    print(
        f"time inside the diagnostics: {inside * 1e3:.1f} ms per evaluation = {100 * inside / off:.2f}% of one "
        f"({diagnose.seconds / opts.rounds / len(built.tasks) * 1e6:.0f} us per conversation)"
    )
    print("target: at most +5%")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
