"""The transformers backend with the offline SmolLM2 (slow: loads a real model)."""

import asyncio

import pytest

from josh.llm import ContextLengthError, Sampling
from josh.types import system, user

pytestmark = pytest.mark.slow

PROMPT = [system("You are a helpful assistant."), user("Tell me a short story about a cat in a hotel.")]


@pytest.fixture(scope="module")
def llm():
    from josh.llm.hf import HFLLM

    backend = HFLLM("smollm2", batch_window_ms=50, max_batch_size=16)
    yield backend
    backend.close()


async def test_siblings_differ_and_seeds_reproduce(llm):
    sampling = Sampling(temperature=1.0, max_new_tokens=8, seed=11)
    first = await llm.chat(PROMPT, n=3, sampling=sampling)
    again = await llm.chat(PROMPT, n=3, sampling=sampling)
    assert [c.text for c in first] == [c.text for c in again]
    assert len({c.text for c in first}) > 1, "sibling samples of one request must differ"
    unseeded = await llm.chat(PROMPT, n=3, sampling=Sampling(temperature=1.0, max_new_tokens=8))
    assert len({c.text for c in unseeded}) > 1
    assert [c.prompt_tokens > 0 for c in first] == [True, False, False]


async def test_concurrent_calls_share_one_generate(llm):
    before = llm.batcher.batches
    prompts = [[user(q)] for q in ("Hi!", "What is two plus two?", "Name a colour.", "Book a table for two.")]
    sampling = Sampling(temperature=0.8, max_new_tokens=4)
    results = await asyncio.gather(*(llm.chat(p, n=2, sampling=sampling) for p in prompts))
    assert llm.batcher.batches == before + 1
    assert llm.batcher.batch_sizes[-1] == 8
    assert all(len(r) == 2 and all(c.completion_tokens > 0 for c in r) for r in results)


async def test_greedy_row_unaffected_by_sampled_neighbours(llm):
    greedy = Sampling(temperature=0.0, max_new_tokens=6)
    alone = await llm.chat(PROMPT, sampling=greedy)
    mixed, _ = await asyncio.gather(
        llm.chat(PROMPT, sampling=greedy),
        llm.chat(
            [user("Say something random.")],
            n=3,
            sampling=Sampling(temperature=1.2, top_k=50, top_p=0.9, max_new_tokens=6),
        ),
    )
    assert mixed[0].text == alone[0].text


async def test_max_new_tokens_and_stop_strings(llm):
    [full] = await llm.chat(PROMPT, sampling=Sampling(temperature=0.0, max_new_tokens=16))
    assert full.completion_tokens <= 16
    [short] = await llm.chat(PROMPT, sampling=Sampling(temperature=0.0, max_new_tokens=4))
    assert short.completion_tokens == 4 and short.finish_reason == "length"
    assert full.text.startswith(short.text)
    words = full.text.split()
    assert len(words) >= 4, f"greedy reply too short to test stop strings: {full.text!r}"
    stop = " " + words[3]
    [stopped] = await llm.chat(PROMPT, sampling=Sampling(temperature=0.0, max_new_tokens=16, stop=[stop]))
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[: full.text.find(stop)]
    assert stopped.completion_tokens < full.completion_tokens


async def test_tools_reach_the_template_and_long_prompts_fail(llm):
    tools = [{"type": "function", "function": {"name": "find_hotel", "parameters": {"type": "object"}}}]
    [plain] = await llm.chat(PROMPT, sampling=Sampling(max_new_tokens=2))
    [with_tools] = await llm.chat(PROMPT, tools=tools, sampling=Sampling(max_new_tokens=2))
    assert with_tools.prompt_tokens > plain.prompt_tokens, "tools must be rendered into the prompt"
    errors, overflows = llm.usage.errors, llm.usage.overflows
    with pytest.raises(ContextLengthError, match="over the limit"):
        await llm.chat([user("word " * 9000)], sampling=Sampling(max_new_tokens=2))
    assert (llm.usage.errors, llm.usage.overflows) == (errors, overflows + 1), "an over-long prompt is no failure"


async def test_peft_adapter_merged_or_kept_separate(tmp_path, llm):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from josh.llm.hf import HFLLM
    from josh.llm.models import resolve_model

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2"))
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(tmp_path / "adapter")

    separate = HFLLM(str(tmp_path / "adapter"), merge_adapter=False)
    merged = HFLLM(str(tmp_path / "adapter"))
    try:
        assert isinstance(separate.net, PeftModel)
        assert any("lora_A" in name for name, _ in separate.net.named_parameters()), "adapter must stay separate"
        assert not any("lora" in name for name, _ in merged.net.named_parameters())
        greedy = Sampling(temperature=0.0, max_new_tokens=8)
        [base_reply] = await llm.chat(PROMPT, sampling=greedy)
        [separate_reply] = await separate.chat(PROMPT, sampling=greedy)
        [merged_reply] = await merged.chat(PROMPT, sampling=greedy)
        assert separate_reply.text != base_reply.text
        assert merged_reply.text == separate_reply.text
    finally:
        separate.close()
        merged.close()


async def test_shared_system_prompt_is_computed_once(llm):
    from josh.llm.hf import HFLLM

    long_system = system("You book restaurants, hotels and trains for visitors. " * 12)
    conversations = [[long_system, user(q)] for q in ("A cheap hotel, please.", "Any trains to London?")]
    greedy = Sampling(temperature=0.0, max_new_tokens=12)
    uncached = HFLLM(net=llm.net, tokenizer=llm.tokenizer, prefix_cache_tokens=0)
    try:
        expected = await asyncio.gather(*(uncached.chat(c, sampling=greedy) for c in conversations))
    finally:
        uncached.close()
    saved = llm.prefix_cache.saved_tokens
    got = await asyncio.gather(*(llm.chat(c, sampling=greedy) for c in conversations))
    assert [r[0].text for r in got] == [r[0].text for r in expected]
    assert llm.prefix_cache.saved_tokens - saved > 100, "the second row reuses the system prompt's states"


async def test_four_bit_weights_load_and_generate_on_cpu(tmp_path):
    """bitsandbytes 4-bit runs on CPU, for inference as for training (josh.training.model): a tiny Llama with
    SmolLM2's tokenizer loads as NF4 through the hf backend's settings and answers."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from josh.llm.factory import make_llm
    from josh.llm.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    llm = make_llm("hf", str(tmp_path), device="cpu", load_in_4bit=True, dtype="float32")
    try:
        assert type(llm.net.model.layers[0].mlp.up_proj).__name__ == "Linear4bit"
        [reply] = await llm.chat(PROMPT, sampling=Sampling(temperature=0.0, max_new_tokens=4))
        assert reply.completion_tokens > 0
    finally:
        llm.close()
