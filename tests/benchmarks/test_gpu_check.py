"""``benchmarks/gpu_check.py --smoke``: the GPU readiness check's code path on tiny random-weight shapes on the CPU
(vLLM's CPU build, so it runs in the vllm environment: make test-vllm). Two vLLM engine starts and one KTO step:
a few minutes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def summary_value(output: str, label: str) -> str:
    """The text after ``label: `` on the summary line that starts with it."""
    summary = output.split("=== gpu_check summary", 1)[1]
    found = re.search(rf"^{re.escape(label)}: (.*)$", summary, re.MULTILINE)
    assert found, f"no {label!r} line in the summary:\n{summary}"
    return found.group(1)


def test_smoke_prints_every_figure_on_tiny_shapes() -> None:
    import torch

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    out = done.stdout
    assert "=== gpu_check summary (smoke: tiny shapes) ===" in out

    for label in (
        "rollout tokens/s (vllm), Llama-3.2-1B shape",
        "rollout tokens/s (vllm), Llama-3.1-8B shape + LoRA r16",
    ):
        rate = re.fullmatch(r"([\d.]+) tok/s", summary_value(out, label))
        assert rate and float(rate.group(1)) > 0, summary_value(out, label)
    assert "the LoRA adapter changes the greedy reply: yes" in out
    evaluation = re.fullmatch(r"([\d.]+) conversations/min: 2 conversations on the first 2 (mini|toolwoz) test "
                              r"tasks, at most 2 turns, .*failed: 0\)",
                              summary_value(out, "eval (josh eval, vllm), Llama-3.2-1B shape"))  # fmt: skip
    assert evaluation and float(evaluation.group(1)) > 0, summary_value(
        out, "eval (josh eval, vllm), Llama-3.2-1B shape"
    )

    for name in ("Llama-3.2-1B", "Llama-3.1-8B"):
        model = summary_value(out, f"model {name} shape")
        assert re.match(r"[\d.]+M parameters \(tiny: smoke\)", model) and "49,152 rows" in model, model
        assert "not 128,256" in model and "fewer than the real shape's" in model, model
        assert "context 131,072 tokens" in model, model

    paper = summary_value(out, "paper kto (toolwoz-paper-kto-8b.yaml, imported rows), 8B shape, without 4-bit (smoke)")
    assert re.match(r"[\d.]+ GiB \(peak RSS of the CPU process\), 1 steps, \d+ tokens", paper), paper
    peak = summary_value(out, "kto peak memory, 8B shape, without 4-bit (smoke)")
    gib = re.fullmatch(r"([\d.]+) GiB \((peak RSS of the CPU process|torch.cuda.max_memory_allocated)\)", peak)
    assert gib and float(gib.group(1)) > 0, peak

    accelerate, gpus = summary_value(out, "accelerate 2-process kto"), torch.cuda.device_count()
    if gpus < 2:
        assert accelerate == f"skipped: {gpus} GPU(s) visible, a 2-process launch needs 2"
    else:
        assert re.match(r"[\d.]+ GiB peak per GPU", accelerate), accelerate
    assert "4-bit loading" in summary_value(out, "smoke skips")
    assert re.search(r"torch [\w.+]+, vllm [\w.+]+", summary_value(out, "environment"))
    assert re.match(r"[\d.]+ [\d.]+ [\d.]+; total [\d.]+ min", summary_value(out, "load average"))
