"""Ctrl-C during an ``hf`` evaluation stops the generation thread cleanly (exit 130, no abort) and leaves
``results.jsonl`` whole (slow: loads SmolLM2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_ctrl_c_during_hf_generation_exits_cleanly(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "--agent", "act", "--backend", "hf", "--model", "smollm2", "--limit", "4", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(
        [sys.executable, "-m", "josh", *args, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell would ignore it
    )
    log = out / "eval.log"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (log.exists() and "Loading weights" in log.read_text()):
        time.sleep(0.5)
    time.sleep(3)  # the model is loaded; the first batch is generating
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 130, output
    assert "terminate called" not in output and "Traceback" not in output
    assert output.strip().splitlines()[-1].startswith("interrupted: finished conversations are in")
    for line in (out / "results.jsonl").read_text().splitlines():
        json.loads(line)
