"""A backend that goes down mid-run never becomes a result (issue 48): against a real OpenAI-compatible server that
dies after N requests, ``josh eval`` and ``josh rollout`` stop with work left undone (the time it took is printed)
with a non-zero exit and one line naming the backend, no record written after the outage counts as done, and a rerun against a healthy server
completes the run into exactly what an uninterrupted run writes (the server's replies are a function of the
request). The hf backend's failed batch (an out-of-memory ``generate``) is a failure too, not a zero."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.agents.react import ReactProtocol
from josh.cli.main import app
from josh.types import ToolCall
from tests.fault_server import FaultServer

KEY = "sk-josh-outage-test-3b1d"
FAST = {"max_retries": 2, "timeout_s": 5.0, "backoff_s": 0.01, "max_backoff_s": 0.05}
REACT = ReactProtocol()


@pytest.fixture(autouse=True)
def _local(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def react_reply(body: dict) -> dict:
    """Search when the customer spoke, then speak once the result is in: valid ReACT, the same for the same request."""
    last = body["messages"][-1]
    if "APIRETURN" in str(last.get("content") or ""):
        text = REACT.reply_text("I found a few hotels in the north. Anything else?")
    else:
        text = REACT.call_texts([ToolCall(name="search_hotel", arguments={"area": "north"})])[0]
    return {"role": "assistant", "content": text}


def josh(command: str, server: FaultServer, out: Path, *extra: str) -> tuple[int, str, float]:
    """Run ``josh COMMAND`` against ``server``: exit code, output and the monotonic time it returned."""
    args = [command, "--backend", "openai", "--base-url", server.url, "--model", "fake", "--agent", "react"]
    args += ["--user", "agenda", "--no-progress", "--out", str(out), *extra]
    args += [item for k, v in FAST.items() for item in ("--llm-option", f"{k}={v}")]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output, time.monotonic()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def latest(records: list[dict]) -> dict[tuple, dict]:
    return {(r["task_id"], r.get("trial", 0)): r for r in records}


def same_conversation(record: dict) -> dict:
    return {k: record[k] for k in ("reward", "success", "end_reason", "messages", "transcript", "errors", "turns")}


def same_tree(tree: dict) -> dict:
    nodes = [
        {k: n[k] for k in ("messages", "reply", "user", "goals", "ideal", "pruned", "errors")} for n in tree["nodes"]
    ]
    return {"reward": tree["reward"], "success": tree["success"], "nodes": nodes}


def interrupted_then_resumed(command: str, tmp_path: Path, die_after: int, files: str, *extra: str) -> dict:
    """The reference run, the run whose server dies, the rerun; the checks they share. The records, per key, of
    the reference and the resumed run."""
    healthy = FaultServer(react_reply, api_key=KEY, rate=0.0)
    try:
        code, output, _ = josh(command, healthy, tmp_path / "reference", *extra)
    finally:
        healthy.close()
    assert code == 0, output
    reference = latest(lines(tmp_path / "reference" / files))
    assert reference and not any(r.get("failed") for r in reference.values())

    dying = FaultServer(react_reply, api_key=KEY, rate=0.0, die_after=die_after)
    out = tmp_path / "run"
    try:
        code, output, ended = josh(command, dying, out, *extra)
    finally:
        dying.close()
    assert dying.died_at is not None
    detection_s = ended - dying.died_at
    print(f"{command}: backend gone -> run stopped in {detection_s:.2f} s")
    assert code != 0 and "Traceback" not in output
    assert len(output.strip().splitlines()) == 1, output
    assert f"openai:fake at {dying.url} is down" in output and "Last error:" in output
    written = lines(out / files)
    done = {key: r for key, r in latest(written).items() if not r.get("failed")}
    assert len(done) < len(reference)  # the outage left work undone ...
    for key, record in done.items():  # ... and what counts as done is what a healthy backend gives
        assert same_conversation(record) == same_conversation(reference[key]) if files == "results.jsonl" else True

    again = FaultServer(react_reply, api_key=KEY, rate=0.0)
    try:
        code, output, _ = josh(command, again, out, *extra)
    finally:
        again.close()
    assert code == 0, output
    resumed = latest(lines(out / files))
    assert not any(r.get("failed") for r in resumed.values())
    assert len(again.log) < len(healthy.log)  # finished work was not redone
    return {"reference": reference, "resumed": resumed}


def test_eval_stops_when_its_backend_dies_and_a_rerun_completes_it(tmp_path):
    extra = ("--limit", "8", "--max-turns", "3", "--concurrency", "4")
    runs = interrupted_then_resumed("eval", tmp_path, 20, "results.jsonl", *extra)
    reference, resumed = runs["reference"], runs["resumed"]
    assert resumed.keys() == reference.keys()
    assert {k: same_conversation(r) for k, r in resumed.items()} == {
        k: same_conversation(r) for k, r in reference.items()
    }
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["conversations"] == 8 and summary["failed"] == 0 and summary["pending"] == 0


def test_rollout_stops_when_its_backend_dies_and_a_rerun_completes_it(tmp_path):
    extra = ("--limit", "4", "--max-depth", "2", "--beam", "2", "--branching", "2", "--concurrency", "2")
    runs = interrupted_then_resumed("rollout", tmp_path, 12, "trees.jsonl", *extra)
    reference, resumed = runs["reference"], runs["resumed"]
    assert resumed.keys() == reference.keys()
    assert {k: same_tree(t) for k, t in resumed.items()} == {k: same_tree(t) for k, t in reference.items()}
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["tasks"] == 4 and stats["failed"] == 0 and stats["pending"] == 0


def test_an_out_of_memory_batch_in_the_hf_backend_is_a_failure_not_a_zero(tmp_path, monkeypatch):
    """A tiny random Llama behind the hf backend whose ``generate`` raises CUDA's out-of-memory error: every
    conversation is failed (none is a zero-reward result) and the run stops naming the backend."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from josh.agents import make_agent
    from josh.envs import build_env
    from josh.eval.evaluate import evaluate, load_results
    from josh.llm.health import BackendDownError, stop_if_failing
    from josh.llm.hf import HFLLM
    from josh.llm.models import resolve_model
    from josh.users import make_user

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=4096, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    net = LlamaForCausalLM(config).eval()

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(net, "generate", out_of_memory)
    llm = HFLLM(net=net, tokenizer=tokenizer, batch_window_ms=5)
    env = build_env("toolwoz", "mini")
    agent, user = make_agent("react", env, llm), make_user("agenda")
    try:
        with pytest.raises(BackendDownError, match=r"hf.* is down: .*CUDA out of memory"):
            asyncio.run(
                evaluate(
                    env,
                    env.tasks("test")[:8],
                    agent,
                    user,
                    tmp_path,
                    concurrency=2,
                    max_turns=2,
                    guard=lambda: stop_if_failing([llm]),
                )  # fmt: skip
            )
    finally:
        llm.close()
    records = load_results(tmp_path)
    assert records and all(r.failed and "CUDA out of memory" in r.failed for r in records)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["conversations"] == 0 and summary["failed"] == len(records) and summary["pending"] == 8
