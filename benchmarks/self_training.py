"""JOSH's own increment over the policy that ran the search, read from loop reports and pooled over seeds.

    .venv/bin/python benchmarks/self_training.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR is a ``josh loop`` run folder holding ``report.json``: one seed, or the parent of several
(``josh loop --seeds N``), which stands for all of its seeds. Prints one line per seed (its increment and interval),
then, last, exactly one line::

    JOSH increment: +X.XXX [lo, hi] over N tasks; seeds excluding zero: K/M

The pooled increment averages each held-out task's difference over the seeds (a seed that trained no JOSH model
counts as 0, one that has not finished is left out) with a 95% bootstrap interval over tasks; K counts the
seeds whose own interval lies above zero, M the seeds pooled. It times nothing: the run times and the load average
they ran under are in each seed's report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from josh.loop.pooling import increment_line, pooled_headline
from josh.loop.render import headline_text
from josh.loop.seeds import seed_reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="josh loop run folders with report.json")
    args = parser.parse_args(argv)
    try:
        reports = seed_reports(args.run_dirs)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for report in reports:
        print(f"{report.run_dir} (seed {report.seed}): {headline_text(report)}")
    print(increment_line(pooled_headline(reports)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
