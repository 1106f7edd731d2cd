"""``benchmarks/gpu_check.py --smoke --backend hf``: the readiness check on a machine without vLLM (the rollouts
through the ``hf`` backend), in the main environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_hf_backend_check_prints_its_rollout_figures_and_the_training_peak() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "benchmarks/gpu_check.py", "--smoke", "--backend", "hf"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = done.stdout.split("=== gpu_check summary (smoke: tiny shapes) ===", 1)[1]
    rates = re.findall(r"^rollout tokens/s \(hf\), Llama-3\.[12]-[18]B shape.*: ([\d.]+) tok/s$", summary, re.M)
    assert len(rates) == 2 and all(float(rate) > 0 for rate in rates), summary
    assert "(merged into bf16 weights)" in summary
    assert summary.count("random weights, context 131,072 tokens") == 2, summary  # the real models' context
    evaluation = re.search(r"^eval \(josh eval, hf\), Llama-3\.2-1B shape: ([\d.]+) conversations/min: 2 "
                           r"conversations on the first 2 (mini|toolwoz) test tasks, at most 2 turns, .*failed: 0\)$",
                           summary, re.M)  # fmt: skip
    assert evaluation and float(evaluation.group(1)) > 0, summary
    assert re.search(r"^kto peak memory, 8B shape, without 4-bit \(smoke\): [\d.]+ GiB", summary, re.M), summary
    assert re.search(r"^paper kto \(toolwoz-paper-kto-8b\.yaml, imported rows\), 8B shape, without 4-bit \(smoke\): "
                     r"[\d.]+ GiB", summary, re.M), summary  # fmt: skip


def test_only_the_paper_kto_stage_trains_the_paper_recipe_on_imported_rows() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "benchmarks/gpu_check.py", "--smoke", "--backend", "hf", "--only", "kto-paper"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "paper rows: 6 imported KTO rows from" in done.stdout and "(3 good, 3 bad)" in done.stdout
    summary = done.stdout.split("=== gpu_check summary (smoke: tiny shapes) ===", 1)[1]
    paper = re.search(r"^paper kto \(toolwoz-paper-kto-8b\.yaml, imported rows\), 8B shape, without 4-bit \(smoke\): "
                      r"([\d.]+) GiB \(peak RSS of the CPU process\), 1 steps, (\d+) tokens", summary, re.M)  # fmt: skip
    assert paper and float(paper.group(1)) > 0 and int(paper.group(2)) > 0, summary
    assert "kto peak memory, 8B shape, without 4-bit (smoke): skipped: --only kto-paper" in summary
    assert "eval (josh eval, hf), Llama-3.2-1B shape: skipped: --only kto-paper" in summary
