"""Prefix caching and the CPU weight layout of the hf backend, on a tiny randomly initialised Llama (fast)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from josh.llm.hf import HFLLM, input_major_weights
from josh.llm.hf_prefix import PrefixCache, common_length
from josh.llm.hf_sampling import RowSpec

VOCAB = 64


def tiny_llama(**extra):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, **extra,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


class DigitsTokenizer:
    """Just enough tokenizer for HFLLM._generate: ids decode to space-separated numbers."""

    pad_token_id = 0
    eos_token_id = 1

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids)


def greedy(n=6):
    return RowSpec(temperature=0.0, top_p=1.0, top_k=None, seed=0, max_new_tokens=n)


def prompts_sharing(prefix_len, suffixes, seed=1):
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(2, VOCAB, (prefix_len,), generator=g).tolist()
    return [prefix + torch.randint(2, VOCAB, (n,), generator=g).tolist() for n in suffixes]


def count_forwards(net):
    calls = []
    net.register_forward_pre_hook(lambda module, args, kwargs: calls.append(1), with_kwargs=True)
    return calls


@given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), max_size=12))
def test_common_length(a, b):
    n = common_length(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]


def test_prefix_states_match_a_full_forward():
    net = tiny_llama()
    prompts = prompts_sharing(40, [5, 9, 1])
    cache = PrefixCache(net)
    shared = cache.shared(prompts)
    assert len(shared) == 40
    with torch.inference_mode():
        full = net(input_ids=torch.tensor([prompts[1]]), use_cache=True).past_key_values
    for (keys, values), layer in zip(shared.layers, full.layers, strict=True):
        assert torch.allclose(keys, layer.keys[:, :, :40], atol=1e-5)
        assert torch.allclose(values, layer.values[:, :, :40], atol=1e-5)


def test_generation_with_and_without_prefix_cache_agree():
    net = tiny_llama()
    prompts = prompts_sharing(48, [3, 11, 6, 1])
    without = HFLLM(net=net, tokenizer=DigitsTokenizer(), prefix_cache_tokens=0)
    with_cache = HFLLM(net=net, tokenizer=DigitsTokenizer())
    expected = [c.text for c in without._generate(prompts, [greedy()] * 4)]
    assert [c.text for c in with_cache._generate(prompts, [greedy()] * 4)] == expected
    assert with_cache.prefix_cache.saved_tokens == 48 * 4 - 48
    again = [c.text for c in with_cache._generate(prompts, [greedy()] * 4)]
    assert again == expected
    assert with_cache.prefix_cache.saved_tokens == 2 * (48 * 4) - 48


def test_a_stored_prefix_is_reused_and_extended():
    net = tiny_llama()
    cache = PrefixCache(net, min_tokens=8)
    calls = count_forwards(net)
    system = prompts_sharing(30, [0])[0]
    first = cache.shared([system + [5, 6, 7], system + [8, 9]])
    assert len(first) == 30 and len(calls) == 1
    cache.shared([system + [9, 9], system + [4]])
    assert len(calls) == 1, "the same prefix again costs no forward pass"
    turn = system + [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    longer = cache.shared([turn + [2], turn + [3]])
    assert len(longer) == 40 and len(calls) == 2
    assert [len(e) for e in cache.entries] == [40], "an entry covered by a longer one is dropped"
    shorter = cache.shared([system[:20] + [1], system[:20] + [2]])
    assert len(shorter) == 20 and len(calls) == 2, "a shorter prefix is a slice of a stored one"


def test_budget_evicts_the_least_recently_used():
    cache = PrefixCache(tiny_llama(), max_tokens=60, min_tokens=8)
    a, b, c = (prompts_sharing(25, [1, 2], seed=s) for s in (1, 2, 3))
    cache.shared(a)
    cache.shared(b)
    cache.shared(a)
    cache.shared(c)
    kept = {e.tokens for e in cache.entries}
    assert kept == {tuple(a[0][:25]), tuple(c[0][:25])}


def test_short_prefixes_and_disabled_cache_are_skipped():
    net = tiny_llama()
    assert PrefixCache(net).shared(prompts_sharing(10, [2, 3])) is None
    assert PrefixCache(net, max_tokens=0).shared(prompts_sharing(40, [2, 3])) is None
    single = PrefixCache(net).shared(prompts_sharing(40, [0]))
    assert len(single) == 39, "a row keeps at least one token of its own"


def test_sliding_window_models_are_served_without_prefix_cache():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, sliding_window=16,
    )  # fmt: skip
    llm = HFLLM(net=MistralForCausalLM(config).eval(), tokenizer=DigitsTokenizer())
    outputs = llm._generate(prompts_sharing(40, [2, 3]), [greedy(3)] * 2)
    assert len(outputs) == 2 and not llm.prefix_cache.enabled


def test_input_major_weights_keep_values_and_ties():
    net = tiny_llama()
    ids = torch.tensor([prompts_sharing(20, [0])[0]])
    with torch.inference_mode():
        before = net(input_ids=ids).logits
    input_major_weights(net)
    assert net.lm_head.weight is net.model.embed_tokens.weight
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.t().is_contiguous() for m in linears)
    with torch.inference_mode():
        assert torch.allclose(net(input_ids=ids).logits, before, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 3])
def test_rows_keep_their_own_suffix(rows):
    net = tiny_llama()
    prompts = prompts_sharing(32, [4 + r for r in range(rows)])
    llm = HFLLM(net=net, tokenizer=DigitsTokenizer())
    plain = HFLLM(net=net, tokenizer=DigitsTokenizer(), prefix_cache_tokens=0)
    for prompt, got in zip(prompts, llm._generate(prompts, [greedy(4)] * rows), strict=True):
        [alone] = plain._generate([prompt], [greedy(4)])
        assert got.text == alone.text
