"""The scripted oracle agent with the agenda user over every split of the paper's ToolWOZ (the named source
``toolwoz``): how many tasks reach reward 1.0, the annotation defects, and the time it takes.

    python benchmarks/toolwoz_oracle.py [--splits train val test] [--concurrency 16]

Install the data first (``josh data download toolwoz --source pypi``). Each split goes through
``josh.eval.evaluate.evaluate``, the path ``josh eval`` takes, writing into a temporary folder. The target is every
task at 1.0 except the documented defects (``details.defect``; ``docs/concepts/toolwoz-paper-data.md``). The load average
is printed beside the times, as the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from josh.eval.evaluate import evaluate
from josh.run.components import ComponentOptions, build_components


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_split(split: str, concurrency: int) -> tuple[int, int, int, list[str], float]:
    """(tasks, at 1.0, defects, ids below 1.0 that are not defects, seconds) for one split."""
    built = build_components(ComponentOptions(data="toolwoz", split=split, agent="oracle", user="agenda"))
    defects = {t.id for t in built.tasks if t.details.get("defect")}
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        asyncio.run(evaluate(built.env, built.tasks, built.agent, built.user, out, concurrency=concurrency))
        wall = time.perf_counter() - start
        rows = [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines() if line]
    full = {r["task_id"] for r in rows if r["reward"] == 1.0}
    short = sorted(r["task_id"] for r in rows if r["task_id"] not in full and r["task_id"] not in defects)
    return len(rows), len(full), len(defects), short, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", nargs="+", default=["train", "val", "test", "full_test"])
    parser.add_argument("--concurrency", type=int, default=16)
    opts = parser.parse_args()
    print(f"start: {load()}")
    for split in opts.splits:
        tasks, full, defects, short, wall = run_split(split, opts.concurrency)
        line = f"{split:>9}: {full}/{tasks} tasks at 1.0, {defects} defects, {wall:.1f} s ({load()})"
        print(line + (f"; below 1.0 and not a defect: {', '.join(short[:20])}" if short else ""))


if __name__ == "__main__":
    main()
