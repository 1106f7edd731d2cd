"""The vllm backend with a fake ``vllm`` module (vLLM has no CPU build): batching, n, LoRA requests, errors."""

import asyncio
import json
import sys
import types
from dataclasses import dataclass, field

import pytest

from josh.llm import LLMError, Sampling, make_llm
from josh.llm.vllm import INSTALL_HINT, VLLMLLM
from josh.types import user


class FakeTokenizer:
    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True):
        if any(m["content"] == "explode" for m in messages):
            raise ValueError("template cannot render this")
        head = f"[tools:{len(tools)}]" if tools else ""
        return head + "|".join(m["content"] for m in messages) + ("|>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text.split())))}


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


@dataclass
class FakeStructuredOutputsParams:
    grammar: str | None = None


@dataclass
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@dataclass
class FakeOutput:
    text: str
    token_ids: list
    finish_reason: str


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list
    outputs: list = field(default_factory=list)


class FakeEngine:
    instances: list["FakeEngine"] = []

    def __init__(self, model, **kwargs):
        self.model = model
        self.kwargs = kwargs
        self.calls: list[dict] = []
        FakeEngine.instances.append(self)

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling_params=None, lora_request=None, use_tqdm=True):
        self.calls.append({"prompts": prompts, "params": sampling_params, "lora": lora_request})
        outputs = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            choices = [
                FakeOutput(f"{prompt}#{k}", [1] * (params.max_tokens if k == 0 else 2), "length" if k == 0 else "stop")
                for k in range(params.n)
            ]
            outputs.append(FakeRequestOutput([0, 1, 2], choices))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeEngine
    module.SamplingParams = FakeSamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = FakeLoRARequest
    params = types.ModuleType("vllm.sampling_params")
    params.StructuredOutputsParams = FakeStructuredOutputsParams
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", params)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    FakeEngine.instances.clear()
    return module


@pytest.fixture
def adapter_dir(tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path)}))
    return str(folder)


def test_missing_vllm_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"pip install 'josh\[vllm\]'"):
        VLLMLLM(str(tmp_path))
    assert "josh[vllm]" in INSTALL_HINT


async def test_concurrent_calls_become_one_generate(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path), batch_window_ms=50)
    sampling = Sampling(temperature=0.7, top_k=20, seed=3, stop=["\n"], max_new_tokens=5)
    results = await asyncio.gather(*(llm.chat([user(f"q{i}")], n=2, sampling=sampling) for i in range(4)))
    engine = FakeEngine.instances[0]
    assert len(engine.calls) == 1 and sorted(engine.calls[0]["prompts"]) == [f"q{i}|>" for i in range(4)]
    params = engine.calls[0]["params"][0]
    assert (params.n, params.temperature, params.top_k, params.seed, params.stop, params.max_tokens) == (
        2,
        0.7,
        20,
        3,
        ["\n"],
        5,
    )
    assert engine.calls[0]["lora"] is None
    assert engine.kwargs["enable_prefix_caching"] is True and engine.kwargs["enable_lora"] is False
    for i, out in enumerate(results):
        assert [c.text for c in out] == [f"q{i}|>#0", f"q{i}|>#1"]
        assert [c.finish_reason for c in out] == ["length", "stop"]
        assert [c.prompt_tokens for c in out] == [3, 0]
    assert llm.usage.calls == 4 and llm.usage.completion_tokens == 4 * (5 + 2)
    llm.close()


async def test_adapter_folder_as_model_attaches_lora_request(fake_vllm, adapter_dir, tmp_path):
    llm = make_llm("vllm", adapter_dir, batch_window_ms=50)
    base_view = llm.with_adapter(None)
    await asyncio.gather(llm.chat([user("a")]), base_view.chat([user("b")]), llm.chat([user("c")]))
    engine = FakeEngine.instances[0]
    assert engine.model == str(tmp_path) and engine.kwargs["enable_lora"] is True
    assert len(FakeEngine.instances) == 1, "views share one engine"
    [call] = engine.calls
    by_prompt = dict(zip(call["prompts"], call["lora"], strict=True))
    assert by_prompt["b|>"] is None
    assert by_prompt["a|>"] == by_prompt["c|>"] == FakeLoRARequest("adapter-1", 1, adapter_dir)
    llm.close()


async def test_tools_and_per_request_errors(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path), batch_window_ms=50, max_prompt_tokens=3)
    tools = [{"type": "function", "function": {"name": "f"}}]
    ok, bad, long = await asyncio.gather(
        llm.chat([user("fine")], tools=tools),
        llm.chat([user("explode")]),
        llm.chat([user("far too many words for the limit")]),
        return_exceptions=True,
    )
    assert ok[0].text.startswith("[tools:1]fine")
    assert isinstance(bad, LLMError) and "template" in str(bad)
    assert isinstance(long, LLMError) and "max_prompt_tokens=3" in str(long)
    assert llm.usage.errors == 2
    llm.close()


async def test_max_batch_size_splits_batches(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path), batch_window_ms=50, max_batch_size=4)
    await asyncio.gather(*(llm.chat([user(str(i))], n=2) for i in range(6)))
    assert [sum(p.n for p in c["params"]) for c in FakeEngine.instances[0].calls] == [4, 4, 4]
    llm.close()


def test_bad_adapter_rejected(fake_vllm, tmp_path):
    with pytest.raises(ValueError, match="not a PEFT adapter"):
        VLLMLLM(str(tmp_path), adapter=str(tmp_path))


async def test_grammar_becomes_structured_outputs(fake_vllm, tmp_path):
    llm = VLLMLLM(str(tmp_path), batch_window_ms=5)
    await llm.chat([user("q")], sampling=Sampling(max_new_tokens=3, grammar='start: "x"'))
    await llm.chat([user("q")], sampling=Sampling(max_new_tokens=3))
    engine = FakeEngine.instances[0]
    constrained, free = (call["params"][0] for call in engine.calls)
    assert constrained.structured_outputs.grammar == 'start: "x"' and free.structured_outputs is None
    llm.close()
