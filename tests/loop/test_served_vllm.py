"""The loop with its agent on a served model, on vLLM's CPU build (``make test-vllm``): one ``vllm serve`` with LoRA
and runtime loading on; the baseline runs under the server's name for SmolLM2, the warm-start adapter trained in the
loop is loaded into the server and then evaluated and searched with under its own name, and a rerun resumes without
loading anything again. The server runs in vLLM's dev mode, whose ``/server_info`` tells its ``--max-lora-rank``. Sizes are cut to the bone: plumbing, not quality."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.cli.serve import ModelServer  # noqa: E402
from josh.llm.models import resolve_model  # noqa: E402
from josh.llm.served_adapters import ServedAdapters  # noqa: E402
from josh.loop.recipe import load_loop_recipe  # noqa: E402
from josh.loop.runner import Loop  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "baseline=true",
    "warm_start.tasks=2",
    "warm_start.max_turns=1",
    "rollout.skip=2",
    "rollout.tasks=1",
    "rollout.search.max_depth=1",
    "rollout.search.max_beam=2",
    "rollout.sampling.max_new_tokens=24",
    "extract.min_reward=0.0",
    "extract.drop_errors=[]",
    "eval.limit=1",
    "eval.max_turns=1",
    "eval.sampling.max_new_tokens=24",
    "setup.agent_options.max_generations=2",
    "setup.backend=openai",
    "setup.llm_options.timeout_s=600",
    "sft.optim.max_steps=1",
    "sft.max_length=768",
]


def test_the_loop_loads_each_adapter_it_trains_into_the_server(tmp_path: Path, monkeypatch) -> None:
    base = resolve_model("smollm2")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", base, "--host", "127.0.0.1"]
    command += ["--port", "{port}", "--enable-lora", "--max-lora-rank", "16", "--max-loras", "2", "--dtype", "float32"]
    command += ["--max-model-len", "4096", "--enforce-eager", "--structured-outputs-config", '{"backend": "guidance"}']
    monkeypatch.setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")  # the server's environment is this one's
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")  # /server_info: the loop reads --max-lora-rank before any work
    with ModelServer(base, command=command, log=tmp_path / "server.log").start(timeout_s=1200) as server:
        recipe = load_loop_recipe(
            ROOT / "recipes" / "demo-cpu.yaml", [f"output_dir={tmp_path}", f"setup.base_url={server.base_url}", *TINY]
        )
        assert ServedAdapters(server.base_url).max_lora_rank() == 16
        result = Loop(recipe, progress=False).run()
        served = httpx.get(f"{server.base_url}/models").json()["data"]
        again = Loop(recipe, progress=False).run()
    run_dir = tmp_path / "demo-cpu"
    labels = [e.label for e in result.evaluated]
    assert labels[:2] == ["base", "warm start"]
    adapters = {card["id"]: card["root"] for card in served if card.get("parent")}
    warm = str((run_dir / "round-0" / "warmstart" / "train").resolve())
    assert [name for name, root in adapters.items() if root == warm][0].startswith("demo-cpu/round-0/warmstart/train@")
    for evaluated in result.evaluated:
        records = [json.loads(r) for r in (evaluated.folder / "results.jsonl").read_text().splitlines()]
        assert records and all(r["llm_calls"] >= 1 and "llm_error" not in r["errors"] for r in records), records
    stats = json.loads((run_dir / "round-1" / "rollouts" / "stats.json").read_text())
    assert stats["tasks"] == 1 and stats["llm_calls"] >= 1 and not stats.get("pending")
    assert again.ran == [] and "eval warm start" in again.skipped
