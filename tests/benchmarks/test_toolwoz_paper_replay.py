"""``benchmarks/toolwoz_paper_replay.py`` on the authors' real wheel (slow: ~20 s)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_the_replay_prints_agreement_per_call_type_reward_and_load(paper_wheel) -> None:
    script = ROOT / "benchmarks" / "toolwoz_paper_replay.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script), str(paper_wheel)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "926 rollouts" in out and "trees without a josh task: 0" in out
    shares = dict(re.findall(r"^(search_\w+|book_\w+)\s+\d+\s+([\d.]+)%$", out, re.MULTILINE))
    assert {"search_train", "search_hotel", "book_train"} <= shares.keys()
    assert float(shares["book_hotel"]) > 95 and "load average" in out
    assert re.search(r"josh agrees with 100_percent_reached on \d+/926 trees", out)
