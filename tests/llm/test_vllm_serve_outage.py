"""``vllm serve`` (vLLM's CPU build; ``make test-vllm``) killed under ``josh eval`` and ``josh rollout`` at once
(issue 48; the scenario of ``tests/served_outage.py``, as ``tests/cli/test_serve_real.py`` runs it on ``josh
serve``): both runs stop non-zero within seconds naming the server, nothing written after the kill counts as done;
the server restarted, the same commands rerun to exactly what they wrote against the healthy server first.

One kill and one restart: each start of the server costs about a minute of engine start on a CPU. The server
schedules one sequence at a time (``--max-num-seqs 1``), as ``transformers serve`` does, so that a greedy
conversation's tokens do not depend on which other requests the engine batched it with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.cli.serve import ModelServer  # noqa: E402
from josh.llm.models import resolve_model  # noqa: E402
from tests.cli.test_serve_real import GREEDY, conversations, loopback_without_proxy, searched  # noqa: E402, F401
from tests.served_outage import check_stopped, kill_mid_runs, rerun, restart  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

AGENT = ["--agent", "react"]  # tools in the prompt: the server needs no tool parser
EVAL_TASKS = 2


def test_vllm_serve_killed_mid_evaluation_and_mid_search_stops_both_and_reruns_complete_them(
    tmp_path: Path, monkeypatch
) -> None:
    base = resolve_model("smollm2")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", base, "--host", "127.0.0.1"]
    command += ["--port", "{port}", "--max-num-seqs", "1", "--dtype", "float32", "--max-model-len", "4096"]
    command += ["--enforce-eager"]
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")  # the server's environment is this one's
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # its access log, read to time the kill, written line by line

    def commands(out: Path, url: str) -> tuple[list[str], list[str]]:
        backend = ["--backend", "openai", "--model", base, "--base-url", url, "--llm-option", "timeout_s=600"]
        evaluation = ["eval", "--out", str(out / "eval"), *AGENT, *GREEDY, "--limit", str(EVAL_TASKS)]
        evaluation += ["--max-turns", "2", "--concurrency", "1", *backend]
        search = ["rollout", "--out", str(out / "rollout"), *AGENT, *GREEDY, "--limit", "1", "--beam", "2"]
        search += ["--branching", "2", "--max-depth", "2", *backend]
        return evaluation, search

    with ModelServer(base, command=command, log=tmp_path / "server.log").start(timeout_s=1200) as server:
        for args in commands(tmp_path / "reference", server.base_url):
            rerun(args)
        evaluation, search = commands(tmp_path / "run", server.base_url)
        stopped = kill_mid_runs(server, evaluation, search)
        for name, run in stopped.items():
            print(f"vllm serve killed -> josh {name} stopped in {run.stopped_s:.2f} s (process exit included)")
        check_stopped(stopped["eval"], server.base_url, tmp_path / "run" / "eval" / "results.jsonl", EVAL_TASKS)
        check_stopped(stopped["rollout"], server.base_url, tmp_path / "run" / "rollout" / "trees.jsonl", 1)
        restart(server)
        rerun(evaluation)
        rerun(search)
    assert conversations(tmp_path / "run" / "eval") == conversations(tmp_path / "reference" / "eval")
    assert searched(tmp_path / "run" / "rollout") == searched(tmp_path / "reference" / "rollout")
