"""The vllm backend's bookkeeping with a fake ``vllm`` module: engine arguments, sampling parameters, LoRA requests,
views, per-request errors and a dead engine. What only the real engine can show is in ``test_llm_vllm_real.py``."""

import asyncio
import dataclasses
import json
import os
import sys
import types
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest

from josh.llm import ContextLengthError, LLMError, Sampling, make_llm
from josh.llm.health import BackendDownError, stop_if_failing
from josh.llm.vllm import INSTALL_HINT, VLLMLLM
from josh.types import user


class FakeTokenizer:
    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True):
        if any(m["content"] == "explode" for m in messages):
            raise ValueError("template cannot render this")
        head = f"[tools:{len(tools)}]" if tools else ""
        return head + "|".join(m["content"] for m in messages) + ("|>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [len(word) for word in text.split()]}


@dataclass
class FakeSamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: list | None = None
    top_k: int = 0
    structured_outputs: object = None
    output_kind: object = None


class FakeOutputKind(Enum):
    FINAL_ONLY = 2


@dataclass
class FakeStructuredOutputsParams:
    grammar: str | None = None


@dataclass
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@dataclass
class FakeEngineArgs:
    model: str = ""
    dtype: str = "auto"
    enable_prefix_caching: bool = False
    max_num_seqs: int = 128
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    enable_chunked_prefill: bool = True
    structured_outputs_config: dict = field(default_factory=dict)
    enable_lora: bool = False
    max_lora_rank: int = 16
    max_loras: int = 1
    disable_log_stats: bool = False
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int | None = None
    swap_space: float = 4


@dataclass
class FakeOutput:
    text: str
    token_ids: list
    finish_reason: str


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list
    outputs: list = field(default_factory=list)


class FakeAsyncLLM:
    """Answers each request on its own after ``delay`` seconds: sample k is the prompt's ids and ``#k``."""

    instances: list["FakeAsyncLLM"] = []

    def __init__(self, args):
        self.args = args
        self.requests: list[dict] = []
        self.errored = False
        self.refusal: str | None = None
        self.stopped = False
        self.model_config = types.SimpleNamespace(max_model_len=args.max_model_len or 64)
        FakeAsyncLLM.instances.append(self)

    @classmethod
    def from_engine_args(cls, args):
        return cls(args)

    def get_tokenizer(self):
        return FakeTokenizer()

    async def generate(self, request, params, request_id, lora_request=None):
        self.requests.append({"ids": request["prompt_token_ids"], "params": params, "lora": lora_request})
        if self.errored:
            raise RuntimeError("EngineCore encountered an issue")
        if self.refusal:
            raise ValueError(self.refusal)
        if params.temperature == 0 and params.n > 1:
            raise ValueError("n must be 1 when using greedy sampling")
        await asyncio.sleep(0.01)
        text = ",".join(map(str, request["prompt_token_ids"]))
        choices = [
            FakeOutput(f"{text}#{k}", [1] * (params.max_tokens if k == 0 else 2), "length" if k == 0 else "stop")
            for k in range(params.n)
        ]
        yield FakeRequestOutput(request["prompt_token_ids"], choices)

    def shutdown(self):
        self.stopped = True


@pytest.fixture
def fake_vllm(monkeypatch):
    modules = {
        name: types.ModuleType(name)
        for name in (
            "vllm", "vllm.lora", "vllm.lora.request", "vllm.sampling_params", "vllm.platforms", "vllm.engine",
            "vllm.engine.arg_utils", "vllm.v1", "vllm.v1.engine", "vllm.v1.engine.async_llm",
        )
    }  # fmt: skip
    modules["vllm"].SamplingParams = FakeSamplingParams
    modules["vllm.lora.request"].LoRARequest = FakeLoRARequest
    modules["vllm.sampling_params"].StructuredOutputsParams = FakeStructuredOutputsParams
    modules["vllm.sampling_params"].RequestOutputKind = FakeOutputKind
    modules["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cuda")
    modules["vllm.engine.arg_utils"].AsyncEngineArgs = FakeEngineArgs
    modules["vllm.v1.engine.async_llm"].AsyncLLM = FakeAsyncLLM
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    FakeAsyncLLM.instances.clear()
    return modules


def adapter(tmp_path, name="adapter", rank=8, base=None):
    folder = tmp_path / name
    folder.mkdir()
    config = {"base_model_name_or_path": str(base or tmp_path), "r": rank}
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return str(folder)


def test_missing_vllm_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"pip install 'josh-agents\[vllm\]' -c constraints-gpu.txt"):
        VLLMLLM(str(tmp_path))
    assert "make vllm-env" in INSTALL_HINT


def test_a_vllm_build_without_a_device_here_is_one_line(fake_vllm, tmp_path):
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="")
    with pytest.raises(LLMError, match="no device it supports on this machine"):
        VLLMLLM(str(tmp_path))
    assert not FakeAsyncLLM.instances


def test_engine_arguments_per_device(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "")
    VLLMLLM(str(tmp_path)).close()
    gpu = FakeAsyncLLM.instances[-1].args
    assert (gpu.dtype, gpu.enforce_eager, gpu.gpu_memory_utilization, gpu.max_num_seqs) == ("auto", False, 0.9, 256)
    assert gpu.structured_outputs_config == {"backend": "guidance"} and gpu.enable_prefix_caching
    assert gpu.enable_chunked_prefill
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cpu")
    VLLMLLM(str(tmp_path), engine_args={"swap_space": 1}).close()
    cpu = FakeAsyncLLM.instances[-1].args
    assert (cpu.dtype, cpu.enforce_eager, cpu.enable_chunked_prefill, cpu.swap_space) == ("float32", True, False, 1)
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "4"


def test_unknown_engine_arguments_fail_before_the_engine_starts(fake_vllm, tmp_path):
    with pytest.raises(ValueError, match="unknown vLLM engine argument.*not_an_arg"):
        VLLMLLM(str(tmp_path), engine_args={"not_an_arg": 1})
    assert not FakeAsyncLLM.instances


async def test_each_request_is_its_own_engine_request(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path))
    sampling = Sampling(temperature=0.7, top_k=20, seed=3, stop=["\n"], max_new_tokens=5)
    results = await asyncio.gather(*(llm.chat([user("q" * (i + 1))], n=2, sampling=sampling) for i in range(4)))
    engine = FakeAsyncLLM.instances[0]
    assert sorted(r["ids"] for r in engine.requests) == [[i + 3] for i in range(4)]  # "q..|>" tokenised here
    params = engine.requests[0]["params"]
    assert (params.n, params.temperature, params.top_k, params.seed, params.stop, params.max_tokens) == (
        2, 0.7, 20, 3, ["\n"], 5,
    )  # fmt: skip
    assert params.output_kind is FakeOutputKind.FINAL_ONLY and engine.requests[0]["lora"] is None
    for i, out in enumerate(results):
        assert [c.text for c in out] == [f"{i + 3}#0", f"{i + 3}#1"]
        assert [c.finish_reason for c in out] == ["length", "stop"]
        assert [c.prompt_tokens for c in out] == [1, 0]
    assert llm.usage.calls == 4 and llm.usage.completion_tokens == 4 * (5 + 2)
    llm.close()
    assert engine.stopped


async def test_greedy_with_n_samples_asks_one_and_repeats_it(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path))
    out = await llm.chat([user("q")], n=3, sampling=Sampling(temperature=0, max_new_tokens=4))
    assert [r["params"].n for r in FakeAsyncLLM.instances[0].requests] == [1]
    assert [c.text for c in out] == ["3#0"] * 3 and [c.prompt_tokens for c in out] == [1, 0, 0]
    llm.close()


async def test_adapter_views_share_one_engine_and_attach_their_lora(fake_vllm, tmp_path):
    first, second = adapter(tmp_path, "a"), adapter(tmp_path, "b")
    llm = make_llm("vllm", first)
    base, other = llm.with_adapter(None), llm.with_adapter(second)
    await asyncio.gather(
        llm.chat([user("a")]), base.chat([user("bb")]), other.chat([user("ccc")]), llm.chat([user("a")])
    )
    [engine] = FakeAsyncLLM.instances
    assert engine.args.model == str(tmp_path) and engine.args.enable_lora and engine.args.max_loras == 4
    loras = {r["ids"][0]: r["lora"] for r in engine.requests}
    assert loras[4] is None
    assert loras[3] == FakeLoRARequest("adapter-1", 1, first) and loras[5] == FakeLoRARequest("adapter-2", 2, second)
    assert (llm.usage.calls, base.usage.calls, other.usage.calls) == (2, 1, 1)
    llm.close()


def test_adapters_the_engine_cannot_serve_are_refused_up_front(fake_vllm, tmp_path):
    with pytest.raises(ValueError, match="not a PEFT adapter"):
        VLLMLLM(str(tmp_path), adapter=str(tmp_path))
    plain = VLLMLLM(str(tmp_path))
    with pytest.raises(ValueError, match="started without LoRA: start it with enable_lora=true"):
        plain.with_adapter(adapter(tmp_path))
    with pytest.raises(ValueError, match="rank 128, above max_lora_rank=64"):
        VLLMLLM(str(tmp_path), adapter=adapter(tmp_path, "wide", rank=128))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    with pytest.raises(ValueError, match="trained on .*other .*hidden 4096.*not on the served model"):
        VLLMLLM(str(tmp_path), adapter=adapter(tmp_path, "elsewhere", base=other))
    assert len(FakeAsyncLLM.instances) == 1
    plain.close()


async def test_bad_requests_fail_alone(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path), max_prompt_tokens=3, max_model_len=8)
    tools = [{"type": "function", "function": {"name": "f"}}]
    ok, bad, long, too_long = await asyncio.gather(
        llm.chat([user("fine")], tools=tools),
        llm.chat([user("explode")]),
        llm.chat([user("far too many words")]),
        llm.chat([user("x " * 20)]),
        return_exceptions=True,
    )
    assert ok[0].text.startswith("15#0")  # "[tools:1]fine|>" is one word
    assert isinstance(bad, LLMError) and "template" in str(bad)
    assert isinstance(long, ContextLengthError) and "max_prompt_tokens=3" in str(long)
    assert isinstance(too_long, ContextLengthError) and "max_prompt_tokens=3" in str(too_long)
    assert not isinstance(bad, ContextLengthError)
    assert (llm.usage.errors, llm.usage.overflows) == (1, 2), "an over-long prompt is no failed request"
    llm.close()


async def test_prompts_over_the_engines_context_are_context_length_errors(fake_vllm, tmp_path):
    """Over ``max_model_len`` by josh's own count, or refused by the engine in vLLM's words: the typed error, never
    toward the engine being down; an engine's other refusals stay failures."""
    llm = VLLMLLM(str(tmp_path), max_model_len=4)
    with pytest.raises(ContextLengthError, match="max_model_len is 4"):
        await llm.chat([user("one two three four five")])
    FakeAsyncLLM.instances[0].refusal = (
        "The decoder prompt (length 3) is longer than the maximum model length of 2. Make sure that `max_model_len` "
        "is no smaller than the number of text tokens."
    )
    for _ in range(8):
        with pytest.raises(ContextLengthError, match="longer than the maximum model length"):
            await llm.chat([user("q")])
    stop_if_failing([llm])  # nine refused prompts: the engine is not down
    assert (llm.usage.errors, llm.usage.overflows, llm.usage.streak) == (0, 9, 0)
    FakeAsyncLLM.instances[0].refusal = "top_k must be an integer"
    with pytest.raises(LLMError) as refused:
        await llm.chat([user("q")])
    assert not isinstance(refused.value, ContextLengthError) and llm.usage.errors == 1
    llm.close()


async def test_a_dead_engine_fails_every_request_and_stops_the_run(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path))
    await llm.chat([user("q")])
    FakeAsyncLLM.instances[0].errored = True
    with pytest.raises(LLMError, match="EngineCore encountered an issue"):
        await llm.chat([user("q")])
    assert llm.dead and "engine died" in llm.dead
    with pytest.raises(LLMError, match="engine died"):
        await llm.chat([user("q")])
    assert len(FakeAsyncLLM.instances[0].requests) == 2, "no request reaches a dead engine"
    with pytest.raises(BackendDownError, match="engine died.*2 requests failed.*Rerun to resume"):
        stop_if_failing([llm])
    llm.close()


async def test_grammar_becomes_structured_outputs(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path))
    await llm.chat([user("q")], sampling=Sampling(max_new_tokens=3, grammar='start: "x"'))
    await llm.chat([user("q")], sampling=Sampling(max_new_tokens=3))
    constrained, free = (r["params"] for r in FakeAsyncLLM.instances[0].requests)
    assert constrained.structured_outputs.grammar == 'start: "x"' and free.structured_outputs is None
    llm.close()


def test_engine_args_of_the_fake_match_the_settings_used():
    names = {f.name for f in dataclasses.fields(FakeEngineArgs)}
    from josh.llm.config import VLLMConfig
    from josh.llm.vllm import engine_args

    for device in ("cpu", "cuda"):
        assert set(engine_args(VLLMConfig(enable_lora=True), "m", device, True)) <= names


async def test_on_a_cpu_the_base_model_beside_adapters_is_a_zero_adapter(fake_vllm, tmp_path):
    """vLLM's CPU LoRA kernels would give a base-model row the last adapter slot (index -1)."""
    import torch
    from safetensors.torch import load_file, save_file

    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cpu")
    first = adapter(tmp_path, "a")
    save_file({"lora_A.weight": torch.ones(2, 3)}, f"{first}/adapter_model.safetensors")
    llm = make_llm("vllm", first, merge_adapter=False)
    base = llm.with_adapter(None)
    await asyncio.gather(llm.chat([user("a")]), base.chat([user("bb")]))
    loras = {r["ids"][0]: r["lora"] for r in FakeAsyncLLM.instances[0].requests}
    zero = loras[4].lora_path
    assert loras[3].lora_path == first and zero != first
    assert json.loads(Path(zero, "adapter_config.json").read_text())["r"] == 8
    assert load_file(f"{zero}/adapter_model.safetensors")["lora_A.weight"].abs().sum() == 0
    llm.close()
    assert not os.path.exists(zero)


def test_a_cpu_engine_sizes_its_lora_rank_limit_to_the_adapter_it_starts_with(fake_vllm, tmp_path):
    """A CPU engine's LoRA work grows with max_lora_rank, not with the adapter's rank: unless set, the limit is the
    starting adapter's rank rounded up to a size vLLM takes; a GPU engine, or one started without an adapter, keeps 64."""
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cpu")
    limits = {}
    for name, rank, settings in (("r8", 8, {}), ("r12", 12, {}), ("set", 8, {"max_lora_rank": 32})):
        VLLMLLM(str(tmp_path), adapter=adapter(tmp_path, name, rank=rank), merge_adapter=False, **settings).close()
        limits[name] = FakeAsyncLLM.instances[-1].args.max_lora_rank
    VLLMLLM(str(tmp_path), enable_lora=True).close()
    limits["no adapter"] = FakeAsyncLLM.instances[-1].args.max_lora_rank
    assert limits == {"r8": 8, "r12": 16, "set": 32, "no adapter": 64}
    llm = VLLMLLM(str(tmp_path), adapter=str(tmp_path / "r8"), merge_adapter=False)
    with pytest.raises(
        ValueError, match="rank 12, above max_lora_rank=8: start the engine with --llm-option max_lora_rank=16"
    ):
        llm.with_adapter(str(tmp_path / "r12"))
    llm.close()
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cuda")
    VLLMLLM(str(tmp_path), adapter=str(tmp_path / "r8")).close()
    assert FakeAsyncLLM.instances[-1].args.max_lora_rank == 64
