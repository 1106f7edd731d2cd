"""Every backend says "the prompt is longer than the model's context" with one typed error, counted apart from the
failures that make a backend down (issue 66): the hf backend's own check, an OpenAI-compatible server's HTTP 400 in
OpenAI's and vLLM's words. The vllm backend's engine checks are in ``test_vllm.py``."""

from __future__ import annotations

import asyncio

import pytest

from josh.llm import ContextLengthError, LLMError, Sampling
from josh.llm.factory import check_buildable, llm_config
from josh.llm.health import FailurePolicy, failing_backend
from josh.llm.openai import OpenAILLM
from josh.types import user
from tests.fault_server import OVERFLOW_ANSWERS, FaultServer

KEY = "sk-josh-context-test-51c0"
FAST = {"timeout_s": 2.0, "backoff_s": 0.01, "max_backoff_s": 0.05, "max_retries": 2}
STRICT = FailurePolicy(max_consecutive=2, window=4, max_share=0.25)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.mark.parametrize(
    ("answer", "overflow"),
    [
        (str(OVERFLOW_ANSWERS["openai"]), True),
        (str(OVERFLOW_ANSWERS["vllm"]), True),
        ("Error code: 400 - {'error': {'code': 'context_length_exceeded', 'message': 'too long'}}", True),
        ("'max_tokens' or 'max_completion_tokens' is too large: 256. This model's maximum context length is 2048 "
         "tokens and your request has 1900 input tokens (256 > 2048 - 1900).", True),  # vLLM before 0.10
        ("The decoder prompt (length 5000) is longer than the maximum model length of 4096.", True),
        ("the request exceeds the available context size, try increasing it", True),  # llama.cpp server
        ("Error code: 400 - {'error': {'message': 'temperature must be in [0, 2]'}}", False),
        ("the context of this conversation is long", False),
        ("maximum context length is unknown", False),
    ],
)  # fmt: skip
def test_server_answers_that_mean_the_prompt_is_too_long(answer, overflow):
    assert ContextLengthError.recognises(answer) is overflow


@pytest.mark.parametrize("style", sorted(OVERFLOW_ANSWERS), ids=lambda style: f"in_{style}_words")
async def test_a_400_for_the_prompts_length_is_a_context_length_error_not_a_failure(style):
    """Many over-long prompts in a row from a server that answers: the typed error each time, no retry, the backend
    never down, its ``n > 1`` support untouched; a short prompt is answered after them."""
    server = FaultServer(api_key=KEY, rate=0.0, context_messages=1, overflow_style=style)
    llm = OpenAILLM("m", base_url=server.url, api_key=KEY, **FAST)
    try:
        for _ in range(6):
            with pytest.raises(ContextLengthError, match="prompt too long for the model: .*maximum context length"):
                await llm.chat([user("first"), user("second")], n=2, sampling=Sampling(seed=1))
        assert failing_backend([llm], STRICT) is None and failing_backend([llm], STRICT, ended=True) is None
        [answer] = await llm.chat([user("short")])
    finally:
        await llm.aclose()
        server.close()
    assert answer.text == "How else can I help?"
    assert (llm.usage.errors, llm.usage.overflows, llm.usage.streak) == (0, 6, 0)
    assert llm.supports_n and not llm.retries
    assert server.log == ["too long"] * 6 + ["ok"]


async def test_any_other_400_stays_a_failed_request():
    server = FaultServer(api_key=KEY, rate=0.0, max_requests=0)  # answers 400: "request budget is spent"
    llm = OpenAILLM("m", base_url=server.url, api_key=KEY, **FAST)
    try:
        with pytest.raises(LLMError, match="request rejected") as rejected:
            await llm.chat([user("hi")])
    finally:
        await llm.aclose()
        server.close()
    assert not isinstance(rejected.value, ContextLengthError)
    assert (llm.usage.errors, llm.usage.overflows) == (1, 0)


def tiny_hf(context: int, **settings):
    """The hf backend on a random one-layer Llama with SmolLM2's tokenizer and a ``context``-token window."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from josh.llm.hf import HFLLM
    from josh.llm.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=context, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return HFLLM(net=LlamaForCausalLM(config).eval(), tokenizer=tokenizer, batch_window_ms=1, **settings)


async def test_the_hf_backend_refuses_prompts_over_its_context_or_limit_with_the_typed_error():
    """Over the model's own context (minus the tokens to generate) or over ``max_prompt_tokens``: the typed error
    for that request alone, while a short one in the same batch is answered."""
    llm = tiny_hf(256)
    limited = tiny_hf(4096, max_prompt_tokens=100)
    sampling = Sampling(temperature=0.0, max_new_tokens=4)
    try:
        [short] = await llm.chat([user("hi")], sampling=sampling)
        with pytest.raises(ContextLengthError, match=r"over the limit of 252 .*context 256 minus max_new_tokens 4"):
            await llm.chat([user("word " * 300)], sampling=sampling)
        with pytest.raises(ContextLengthError, match="over the limit of 100 .*max_prompt_tokens=100"):
            await limited.chat([user("word " * 150)], sampling=sampling)
    finally:
        llm.close()
        limited.close()
    assert short.completion_tokens >= 1
    assert (llm.usage.calls, llm.usage.errors, llm.usage.overflows) == (1, 0, 1)
    assert (limited.usage.errors, limited.usage.overflows) == (0, 1)


@pytest.fixture(scope="module")
def short_context_folder(tmp_path_factory):
    """A model folder (config and tokenizer, no weights) with SmolLM2's tokenizer and chat template and a 300-token
    context: what the openai backend reads to count, without loading a model."""
    from transformers import AutoTokenizer, LlamaConfig

    from josh.llm.models import resolve_model

    folder = tmp_path_factory.mktemp("short-context")
    AutoTokenizer.from_pretrained(resolve_model("smollm2")).save_pretrained(folder)
    LlamaConfig(max_position_embeddings=300).save_pretrained(folder)
    return folder


async def test_the_openai_backend_counts_a_served_folders_prompts_and_refuses_the_long_ones_unsent(
    short_context_folder,
):
    """The model name is a local folder (as ``josh serve`` names it): a prompt over its context less ``max_tokens``,
    or over ``max_prompt_tokens``, is refused before it is sent, counted as the hf backend counts it; a short prompt
    is sent; the server is never asked to answer an over-long one."""
    server = FaultServer(api_key=KEY, rate=0.0)
    llm = OpenAILLM(str(short_context_folder), base_url=server.url, api_key=KEY, **FAST)
    limited = OpenAILLM(str(short_context_folder), base_url=server.url, api_key=KEY, max_prompt_tokens=60, **FAST)
    tools = [{"type": "function", "function": {"name": "find", "parameters": {"type": "object", "properties": {}}}}]
    sampling = Sampling(max_new_tokens=40)
    try:
        [answer] = await llm.chat([user("hi")], tools=tools, sampling=sampling)
        with pytest.raises(ContextLengthError, match=r"over the limit of 260 .*context 300 minus max_new_tokens 40"):
            await llm.chat([user("word " * 300)], sampling=sampling)
        with pytest.raises(ContextLengthError, match=r"tokens, over the limit of 60 \(max_prompt_tokens=60"):
            await limited.chat([user("hi")], tools=tools, sampling=sampling)  # the tools count
        [short] = await limited.chat([user("hi")], sampling=sampling)
        asked = [user("word " * (300 if k % 2 else 1)) for k in range(8)]  # at once: counted one at a time
        together = await asyncio.gather(*(llm.chat([m], sampling=sampling) for m in asked), return_exceptions=True)
    finally:
        await llm.aclose()
        await limited.aclose()
        server.close()
    assert answer.text == short.text == "How else can I help?"
    assert [isinstance(r, ContextLengthError) for r in together] == [False, True] * 4
    assert server.log == ["ok"] * 6
    assert (llm.usage.calls, llm.usage.errors, llm.usage.overflows) == (5, 0, 5)
    assert (limited.usage.calls, limited.usage.errors, limited.usage.overflows) == (1, 0, 1)
    hf = tiny_hf(4096)  # the same tokenizer and template: the hf backend's own count of the prompt
    try:
        [counted] = await hf.chat([user("hi")], tools=tools, sampling=Sampling(temperature=0.0, max_new_tokens=1))
    finally:
        hf.close()
    assert llm.counter.check([user("hi")], tools, 0) == counted.prompt_tokens > 60


def test_the_openai_backend_counts_only_for_a_local_model_folder(tmp_path):
    """A hub name or a served name keeps the server's own check; ``max_prompt_tokens`` needs a folder to count with,
    and says so rather than going unchecked."""
    assert OpenAILLM("gpt-4o-mini", api_key=KEY).counter is None
    assert OpenAILLM(str(tmp_path), base_url="http://127.0.0.1:9/v1").counter is None  # no config, no tokenizer
    with pytest.raises(ValueError, match="max_prompt_tokens needs the openai backend's --model to be a local model"):
        OpenAILLM("gpt-4o-mini", api_key=KEY, max_prompt_tokens=1000)
    with pytest.raises(ValueError, match="'served-name' is not one"):  # before a run starts (--plan included)
        check_buildable(llm_config("openai", "served-name", base_url="http://127.0.0.1:9/v1", max_prompt_tokens=1000))
