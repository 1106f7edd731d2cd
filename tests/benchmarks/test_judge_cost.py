"""``benchmarks/judge_cost.py --quick`` runs end to end and prints every figure with the load beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_cost.py"


def test_quick_run_prints_calls_seconds_per_turn_and_share_with_the_load() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0].strip(): line for line in done.stdout.splitlines() if ":" in line}
    assert "(0 failed)" in lines["judge scripted"]
    for figure in ("evaluation wall time", "judge seconds per turn", "judge share of wall"):
        assert "load" in lines[figure], done.stdout
    calls = int(lines["judge LLM calls"].split()[3])
    assert calls > 0 and "(1.00 per turn)" in lines["judge LLM calls"]
