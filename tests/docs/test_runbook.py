"""The GPU runbook (``docs/runbook-gpu.md``) rehearsed on a CPU: every shell block of the page, in order, as written
but for the substitutions of ``REHEARSAL``, which the page shows in the same table.

The rehearsal (``vllm``, ``slow``: ``make test-vllm``) runs vLLM's CPU build behind ``vllm serve``'s own command line
with runtime LoRA loading, a real Ray cluster, a real 2-process ``accelerate launch`` (gloo), τ²'s own evaluator and
export, on SmolLM2-135M-Instruct with every size cut to the bone: plumbing, not quality. The user simulator, GPT-4o
on the page, is SmolLM2 behind ``josh serve``, started here. The fast tests check that the page's table is this one,
that every substitution is used, and what the substituted page no longer names."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "runbook-gpu.md"
VLLM_SERVER = "VLLM_CPU_KVCACHE_SPACE=2 python -m vllm.entrypoints.openai.api_server --dtype float32 --enforce-eager"
# Each text on the page (left) is replaced, wherever it appears, by the rehearsal's (right), in this order; BASE is
# SmolLM2's folder, P1 and P2 free loopback ports (the agent's server and the user's). The page holds the same table.
REHEARSAL = {
    "vllm serve ": f"{VLLM_SERVER} --max-model-len 8192 --model ",
    "meta-llama/Meta-Llama-3-8B-Instruct": "BASE",
    "--max-lora-rank 64": "--max-lora-rank 8",
    "localhost:8000": "127.0.0.1:P1",
    "--port 8000": "--port P1",
    "--user-model gpt-4o": "--user-model BASE --user-base-url http://127.0.0.1:P2/v1 "
    "--user-option 'sampling={temperature: 0, max_new_tokens: 32}'",
    "--actors 4": "--actors 2",
    "--split train": "--split train --limit 1",
    "--beam 8 --branching 2 --max-depth 15": "--beam 2 --branching 2 --max-depth 2",
    "--max-new-tokens 512": "--max-new-tokens 48",
    "rollouts/paper-train/kto.jsonl": "tests/data/paper_kto_rows.jsonl",
    "training/multi_gpu.yaml": "training/cpu_ddp.yaml",
    "recipes/llama3-8b-josh-kto.yaml": "recipes/llama3-8b-josh-kto.yaml --set model.name=BASE --set lora.r=8 "
    "--set lora.alpha=8 --set max_length=2048 --set optim.max_steps=1 --set quantization.load_in_4bit=false "
    "--set optim.optim=adamw_torch --set optim.bf16=false --set model.dtype=float32",
    "--set optim.gradient_accumulation_steps=4": "--set optim.gradient_accumulation_steps=1",
    "--split test": "--split test --limit 1",
    "--split base": "--split base --limit 1",
    "--max-turns 15": "--max-turns 1",
    "--trials 4": "--trials 1",
    "airline retail telecom": "retail",
    "runs/tau2-airline runs/tau2-retail runs/tau2-telecom": "runs/tau2-retail",
}
GPU_ONLY = ("meta-llama", "gpt-4o", "localhost:8000", "multi_gpu.yaml", "vllm serve", "--max-lora-rank 64")


def blocks() -> list[str]:
    """The page's shell blocks, in order, as written."""
    return re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def page_table() -> dict[str, str]:
    """The page's substitution table: the first two columns of the rows after its marker."""
    text = PAGE.read_text(encoding="utf-8")
    after = text[text.index("<!-- runbook: substitutions -->") :].split("\n", 1)[1].lstrip("\n")
    rows = after.split("\n\n")[0].splitlines()
    pairs = [re.findall(r"`([^`]*)`", row) for row in rows if row.strip().startswith("| `")]
    return {pair[0]: pair[1] for pair in pairs}


def rehearsed(block: str, values: dict[str, str]) -> str:
    """``block`` with every substitution applied, then ``BASE``, ``P1`` and ``P2`` filled in from ``values``."""
    for page, rehearsal in REHEARSAL.items():
        block = block.replace(page, rehearsal)
    return re.sub(r"\b(BASE|P1|P2)\b", lambda m: values[m.group(1)], block)


def test_the_page_shows_the_rehearsal_table():
    assert page_table() == REHEARSAL


def test_every_substitution_is_used_and_the_rehearsal_names_nothing_of_the_gpu_run():
    page = "\n".join(blocks())
    assert [text for text in REHEARSAL if text not in page] == []
    done = "\n".join(rehearsed(block, {"BASE": "/m", "P1": "1", "P2": "2"}) for block in blocks())
    assert [text for text in GPU_ONLY if text in done] == []


def commands(block: str) -> list[str]:
    """Each command line of a block as its program and first word (environment assignments skipped)."""
    lines = [line.split() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    words = [[w for w in line if not re.match(r"^[A-Z_]+=", w)] for line in lines]
    return [" ".join(line[:2]) if line[0] in ("josh", "vllm", "accelerate") else line[0] for line in words]


def test_the_page_runs_the_paper_pipeline_in_order():
    assert [commands(block) for block in blocks()] == [
        ["josh data", "josh data"],
        ["vllm serve", "until"],
        ["josh rollout", "josh rollout"],
        ["josh extract"],
        ["accelerate launch", "accelerate launch", "curl"],
        ["josh eval", "josh eval", "josh eval", "josh compare"],
        ["for", "josh eval", "done", "josh export"],
    ]
    page = "\n".join(blocks())
    for step in ("--source pypi", "--data toolwoz", "--ray local", "--enable-lora", "--num_processes 2", "--plan"):
        assert step in page
    assert "runbook-gpu.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}", PYTHONPATH=str(ROOT))
    env.update(JOSH_CACHE=str(cache), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", WANDB_MODE="offline")
    env.update(NO_PROXY="127.0.0.1,localhost", COLUMNS="200", RAY_worker_niceness="0", PYTHONUNBUFFERED="1")
    return env


def _stop(groups: list[int]) -> None:
    """The process groups the blocks left running (the agent's server), terminated, then killed."""
    for group in groups:
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for group in groups:
        try:
            subprocess.run(["timeout", "30", "tail", "--pid", str(group), "-f", "/dev/null"], check=False)
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def folder(tmp_path: Path, paper_wheel: Path) -> Path:
    """A fresh working folder that looks like the repository root to the page's commands, and a fresh josh cache
    holding SmolLM2 (converted once per machine) and the verified paper wheel (fetched once per session)."""
    from josh.envs.toolwoz.paper_package import WHEEL
    from josh.llm.models import resolve_model

    work, cache = tmp_path / "work", tmp_path / "cache"
    (work / "tests").mkdir(parents=True)
    for name in ("recipes", "training"):
        (work / name).symlink_to(ROOT / name)
    (work / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    (cache / "josh-train").mkdir(parents=True)
    shutil.copy(paper_wheel, cache / "josh-train" / WHEEL)
    (cache / "models").symlink_to(Path(resolve_model("smollm2")).parent)
    return work


@pytest.fixture
def user_server(tmp_path: Path) -> Iterator[object]:
    """SmolLM2 behind ``josh serve`` (transformers serve) on a free loopback port: the rehearsal's user simulator."""
    from josh.cli.serve import ModelServer
    from josh.llm.models import resolve_model

    with ModelServer(resolve_model("smollm2"), log=tmp_path / "user-server.log").start(timeout_s=600) as server:
        yield server


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM's CPU build: make test-vllm")
def test_the_runbook_runs_as_written_on_a_cpu(folder: Path, user_server, tmp_path: Path) -> None:
    from josh.cli.serve import free_port
    from josh.llm.models import resolve_model

    values = {"BASE": resolve_model("smollm2"), "P1": str(free_port("127.0.0.1")), "P2": str(user_server.port)}
    env, left_running, outputs = _environment(tmp_path / "cache"), [], []
    try:
        for block in blocks():
            script = rehearsed(block, values)
            done = subprocess.Popen(["bash", "-eo", "pipefail", "-c", script], cwd=folder, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            if re.search(r"&\s*$", script, re.M):
                left_running.append(done.pid)  # its server runs on in the block's process group
            output = done.communicate(timeout=1800)[0]
            log = (folder / "vllm-agent.log").read_text()[-4000:] if (folder / "vllm-agent.log").exists() else ""
            assert done.returncode == 0, f"{script}\nfailed:\n{output}\nagent server log:\n{log}"
            assert "Traceback" not in output, f"{script}\n{output}"
            outputs.append(output)
    finally:
        _stop(left_running)
    checked(folder, outputs)


def checked(folder: Path, outputs: list[str]) -> None:
    """What each step wrote, as the page says."""
    data, _server, rollout, extract, train, evaluation, tau2 = outputs
    assert re.search(r"│\s+test │\s+450 │", data), data  # josh data stats: the 450 test tasks
    assert "plan only: nothing was run or written" in rollout
    stats = json.loads((folder / "rollouts/paper-train/stats.json").read_text())
    assert stats["tasks"] == 1 and stats["llm_errors"] == 0 and stats["run"]["data"] == "toolwoz"
    assert json.loads((folder / "rollouts/paper-train/extract_stats.json").read_text())["trees"] == 1
    assert (folder / "rollouts/paper-train/README.md").is_file() and "0/1 trees used" in extract
    assert train.count("effective batch") == 1 and "x 2 process(es)" in train  # the plan, printed by one process
    run = folder / "checkpoints/paper-kto"
    assert (run / "adapter_model.safetensors").is_file() and json.loads((run / "metrics.json").read_text())
    assert "LoRA adapter 'paper-kto' added successfully" in train  # the server's answer to the load
    for name, model in (("paper-kto", "paper-kto"), ("paper-base", None)):
        summary = json.loads((folder / "runs" / name / "summary.json").read_text())
        assert summary["conversations"] == 1 and "llm_error" not in summary["error_counts"]
        assert summary["run"]["data"] == "toolwoz" and (model is None or summary["run"]["model"] == model)
    assert "paper-base" in evaluation and "paper-kto" in evaluation
    retail = json.loads((folder / "runs/tau2-retail/summary.json").read_text())
    assert (
        retail["conversations"] == 1
        and retail["run"]["model"] == "paper-kto"
        and retail["run"]["user"] == "instruction"
    )
    submission = folder / "runs/tau2-submission"
    assert (submission / "trajectories" / "retail.json").is_file() and (submission / "submission.json").is_file()
    assert "not leaderboard-ready" in tau2  # the export names what the leaderboard would refuse (--limit, 1 trial)
