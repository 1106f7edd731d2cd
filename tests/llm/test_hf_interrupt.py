"""Ctrl-C during an ``hf`` evaluation stops the generation thread cleanly (exit 130, no abort) and leaves
``results.jsonl`` whole (slow: loads SmolLM2)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.fakes.process import start_josh

pytestmark = pytest.mark.slow


def test_ctrl_c_during_hf_generation_exits_cleanly(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "--agent", "act", "--backend", "hf", "--model", "smollm2", "--limit", "4", "--out", str(out)]
    process = start_josh([*args, "--no-progress"], HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    results = out / "results.jsonl"  # opened once the model is loaded and the conversations start
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not results.exists():
        time.sleep(0.5)
    time.sleep(3)  # the first batch is generating
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 130, output
    assert "terminate called" not in output and "Traceback" not in output
    assert output.strip().splitlines()[-1].startswith("interrupted: finished conversations are in")
    for line in results.read_text().splitlines():
        json.loads(line)
