"""Continuous batching on vLLM: the same JOSH rollout through vLLM's async engine, through the synchronous batcher
josh used before (concurrent requests gathered into blocking ``LLM.generate`` calls), and through the ``hf`` backend.

Run it in the vLLM environment (``make vllm-env``), on an idle machine:

    .venv-vllm/bin/python benchmarks/vllm_rollout.py [--tasks 16] [--beam 4] [--branching 2] [--max-new-tokens 96]

The rollout: SmolLM2 as a function-calling agent on the first ``--tasks`` ToolWOZ mini train tasks, the rule-based
agenda user (so every LLM request is the agent's), beam search with ``n``-sample branching, sampled at temperature 1
with a fixed seed, so replies end at their own lengths (mixed lengths are where a synchronous batch waits for its
longest member). Prints generated tokens per second for each path, the load average beside each, and the line
``async engine / synchronous batcher: N.NNx`` (target >= 1.2x); then, on each path, how long a 4-token request sent
0.5 s after a 96-token one takes (latency: what continuous batching changes most on a compute-bound CPU engine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from josh.agents import make_agent
from josh.core.llm import LLM, Sampling
from josh.envs import build_env
from josh.llm.config import VLLMConfig
from josh.llm.factory import make_llm
from josh.llm.models import resolve_model
from josh.llm.vllm import VLLMLLM, cpu_kv_cache_gib, engine_args
from josh.llm.vllm_engine import BatchedEngine
from josh.search.algorithm import SearchConfig
from josh.search.rollout import RolloutConfig, run_rollouts
from josh.types import user
from josh.users import make_user

ENGINE = {"max_model_len": 4096, "kv_cache_gib": 4}


def rollout(llm: LLM, tasks: int, beam: int, branching: int, max_new_tokens: int) -> tuple[int, float, float]:
    """(generated tokens, seconds, load average at the end) of one rollout over the first ``tasks`` train tasks."""
    env = build_env("toolwoz", "mini")
    sampling = Sampling(temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    agent = make_agent("function_calling", env, llm, examples=0, sampling=sampling)
    user = make_user("agenda", None)
    config = RolloutConfig(search=SearchConfig(max_beam=beam, branching=branching, max_depth=4))
    before = llm.usage.completion_tokens
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        asyncio.run(run_rollouts(env.tasks("train")[:tasks], env, agent, user, out, config, progress=False))
        seconds = time.perf_counter() - start
    return llm.usage.completion_tokens - before, seconds, os.getloadavg()[0]


def short_behind_long(llm: LLM) -> float:
    """Seconds a 4-token request takes when sent 0.5 s after a 96-token one (what continuous batching is for: through
    the synchronous batcher it waits for the long request's batch to end)."""

    async def both() -> float:
        long = asyncio.ensure_future(llm.chat([user("Tell me a long story about a dragon.")],
                                              sampling=Sampling(temperature=1.0, seed=1, max_new_tokens=96)))  # fmt: skip
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        await llm.chat([user("Say yes.")], sampling=Sampling(temperature=0, max_new_tokens=4))
        seconds = time.perf_counter() - start
        await long
        return seconds

    return asyncio.run(both())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--branching", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--skip-hf", action="store_true", help="measure the two vLLM paths only")
    args = parser.parse_args()
    work = (args.tasks, args.beam, args.branching, args.max_new_tokens)
    config = VLLMConfig(model="smollm2", **ENGINE)

    def synchronous() -> LLM:
        """The baseline: vLLM's synchronous ``LLM`` with josh's batcher (as the backend was before AsyncLLM)."""
        from vllm import LLM as SyncLLM

        os.environ["VLLM_CPU_KVCACHE_SPACE"] = cpu_kv_cache_gib(config)  # as the backend sets it
        engine = SyncLLM(**engine_args(config, resolve_model("smollm2"), "cpu", False))
        return VLLMLLM(_engine=BatchedEngine(engine, max_batch_size=config.max_batch_size, owned=True), _config=config)

    builders = {
        "synchronous batcher": synchronous,
        "async engine": lambda: make_llm("vllm", "smollm2", **ENGINE),
        "hf backend": lambda: make_llm("hf", "smollm2"),
    }
    if args.skip_hf:
        del builders["hf backend"]
    rates = {}
    print(f"SmolLM2-135M on CPU ({os.cpu_count()} cores): {args.tasks} ToolWOZ mini tasks, beam {args.beam}, "
          f"branching {args.branching}, max_new_tokens {args.max_new_tokens}, temperature 1, seed 0")  # fmt: skip
    for name, build in builders.items():
        llm = build()
        try:
            rollout(llm, 1, 1, 1, 8)  # warm-up
            tokens, seconds, load = rollout(llm, *work)
            waited = short_behind_long(llm)
        finally:
            llm.close()
        rates[name] = tokens / seconds
        print(f"{name:>20}: {tokens:6d} tokens in {seconds:6.1f} s = {rates[name]:6.1f} tok/s; a 4-token request "
              f"behind a 96-token one: {waited:.2f} s (load average {load:.2f})", flush=True)  # fmt: skip
    ratio = rates["async engine"] / rates["synchronous batcher"]
    print(f"async engine / synchronous batcher: {ratio:.2f}x (target >= 1.2x)")


if __name__ == "__main__":
    main()
