"""Evaluation through ``transformers serve`` (the openai backend over HTTP) vs the in-process ``hf`` backend.

The same agent, user and greedy settings run over the same tasks twice: once against SmolLM2 served by
``transformers serve`` on a loopback port (started and stopped here), once with the model loaded in this process.
Prints conversations per minute for each with the load average, their ratio, and whether every task's reward (and
every agent message) is identical.

    python benchmarks/server_eval.py [--tasks 20] [--max-turns 2] [--max-new-tokens 32] [--agent function_calling]

The server generates one request at a time (transformers' continuous batching is a GPU feature); the hf backend
batches the conversations in flight into one ``generate``, so it is expected to be the faster of the two on a CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from josh.cli.serve import ModelServer, served_folder
from josh.core.llm import Sampling, aclose_all
from josh.eval.evaluate import evaluate
from josh.run.components import ComponentOptions, build_components


async def run(options: ComponentOptions, out: Path, max_turns: int, concurrency: int) -> tuple[float, dict]:
    """Seconds taken and, per task, (reward, agent messages)."""
    built = build_components(options)
    try:
        start = time.perf_counter()
        await evaluate(
            built.env, built.tasks, built.agent, built.user, out, concurrency=concurrency, max_turns=max_turns
        )
        seconds = time.perf_counter() - start
    finally:
        await aclose_all(built.llms)
        built.close()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return seconds, {r["task_id"]: (r["reward"], r["errors"], agent_text(r["messages"])) for r in rows}


def agent_text(messages: list[dict]) -> list:
    return [
        (m.get("content"), [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []])
        for m in messages
        if m["role"] == "assistant"
    ]


def report(name: str, seconds: float, tasks: int, load: float) -> float:
    rate = tasks / seconds * 60
    print(f"{name:>22}: {tasks} conversations in {seconds:7.1f} s = {rate:5.2f} per minute (load average {load:.1f})")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--agent", default="function_calling")
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()
    sampling = Sampling(temperature=0.0, max_new_tokens=args.max_new_tokens)
    common = dict(agent=args.agent, agent_options={"examples": 0}, limit=args.tasks, agent_sampling=sampling)
    folder = served_folder("smollm2")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with ModelServer(folder, options=["--device", "cpu"], log=out / "server.log") as server:
            patient = {"timeout_s": 3600, "max_concurrency": args.tasks}
            remote = ComponentOptions(backend="openai", model=folder, base_url=server.base_url, llm_options=patient)
            served_s, served = asyncio.run(
                run(remote.model_copy(update=common), out / "srv", args.max_turns, args.tasks)
            )
            served_load = os.getloadavg()[0]
        local = ComponentOptions(backend="hf", model="smollm2", **common)
        local_s, in_process = asyncio.run(run(local, out / "hf", args.max_turns, args.tasks))
        local_load = os.getloadavg()[0]
    print(
        f"SmolLM2-135M-Instruct on CPU ({os.cpu_count()} cores), {args.agent} agent without examples, agenda user, "
        f"{args.tasks} test tasks, {args.max_turns} agent turns, {args.max_new_tokens} new tokens, greedy"
    )
    served_rate = report("transformers serve", served_s, len(served), served_load)
    local_rate = report("hf backend (in process)", local_s, len(in_process), local_load)
    print(f"served / in-process: {served_rate / local_rate:.2f}x")
    same_rewards = {k: v[0] for k, v in served.items()} == {k: v[0] for k, v in in_process.items()}
    same_text = sum(served[k][2] == in_process.get(k, (None, None, None))[2] for k in served)
    failed = [sum("llm_error" in v[1] for v in runs.values()) for runs in (served, in_process)]
    print(f"greedy rewards identical: {same_rewards}; agent messages identical in {same_text} of {len(served)} tasks")
    print(f"conversations cut short by an LLM error: served {failed[0]}, in-process {failed[1]}")


if __name__ == "__main__":
    main()
