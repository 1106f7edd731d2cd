"""Grammar-constrained decoding in the hf backend: a randomly initialised tiny model, whose free output is noise,
writes only valid protocol outputs under the grammar (fast: byte-level tokenizer built in memory). torch and
transformers are imported by the fixtures and tests that use them, not when every xdist worker collects the module."""

import asyncio

import pytest

from josh.agents.act import RESPOND_ACTION, act_grammar, parse_act
from josh.agents.grammar import call_schema
from josh.agents.react import parse_react, react_grammar
from josh.core.llm import LLMError, Sampling
from josh.run.components import build_env
from josh.types import system, user

pytest.importorskip("llguidance")


def byte_tokenizer():
    """A byte-level BPE tokenizer with no merges: 256 byte tokens plus <|im_end|> (EOS) and <pad>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab["<|im_end|>"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<pad>"]})
    tok.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}<assistant>"
    return tok


def tiny_model(vocab, eos, pad):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=eos, pad_token_id=pad,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def llm():
    from josh.llm.hf import HFLLM

    tok = byte_tokenizer()
    backend = HFLLM(net=tiny_model(len(tok), tok.eos_token_id, tok.pad_token_id), tokenizer=tok, batch_window_ms=20)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def tools():
    return build_env("toolwoz", "mini").tools


PROMPT = [system("act"), user("a cheap hotel in the north please")]


def test_grammars_compile_and_reject_nonsense(tools):
    from josh.llm.hf_grammar import grammar_problem

    assert grammar_problem(act_grammar(tools)) is None
    assert grammar_problem(react_grammar(tools)) is None
    assert grammar_problem("start: nothing_defined") is not None
    schema = call_schema(tools, respond=RESPOND_ACTION)
    names = [o["properties"]["name"]["const"] for o in schema["anyOf"]]
    assert names[-1] == RESPOND_ACTION and len(names) == len(tools) + 1
    assert all(o["properties"]["arguments"]["additionalProperties"] is False for o in schema["anyOf"])


def accepted(llm, grammar, text):
    """Whether ``text`` (finished or cut off by the token budget) is a prefix the grammar accepts."""
    import llguidance

    matcher = llguidance.LLMatcher(llm._ll_tokenizer, grammar)
    return all(matcher.consume_token(t) for t in llm.tokenizer(text, add_special_tokens=False)["input_ids"])


async def test_random_model_writes_only_valid_act_outputs(llm, tools):
    names = {t["function"]["name"] for t in tools} | {RESPOND_ACTION}
    enums = {
        (t["function"]["name"], key): set(spec["enum"])
        for t in tools
        for key, spec in t["function"]["parameters"]["properties"].items()
        if "enum" in spec
    }
    grammar = act_grammar(tools)
    outputs = await llm.chat(
        PROMPT, n=8, sampling=Sampling(temperature=1.0, max_new_tokens=160, grammar=grammar, seed=3)
    )
    assert all(accepted(llm, grammar, c.text) for c in outputs), [c.text for c in outputs]
    finished = [c for c in outputs if c.finish_reason == "stop"]
    assert finished, [c.text for c in outputs]
    for completion in finished:
        parsed = parse_act(completion.text)
        assert parsed.error is None, completion.text
        if not parsed.calls:
            assert parsed.reply
            continue
        call = parsed.calls[0].call
        assert call.name in names
        schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call.name)
        assert set(call.arguments) <= set(schema["properties"])
        for key, value in call.arguments.items():
            assert value in enums.get((call.name, key), {value})
    free = await llm.chat(PROMPT, n=4, sampling=Sampling(temperature=1.0, max_new_tokens=40, seed=3))
    assert not any(parse_act(c.text).calls for c in free), "the unconstrained model should write noise"


async def test_unconstrained_rows_share_the_batch(llm, tools):
    free = Sampling(temperature=1.0, max_new_tokens=30, seed=5)
    bound = Sampling(temperature=1.0, max_new_tokens=120, grammar=react_grammar(tools), seed=5)
    alone = await llm.chat(PROMPT, n=2, sampling=free)
    mixed, constrained = await asyncio.gather(
        llm.chat(PROMPT, n=2, sampling=free), llm.chat(PROMPT, n=4, sampling=bound)
    )
    assert [c.text for c in mixed] == [c.text for c in alone]
    assert all(accepted(llm, bound.grammar, c.text) for c in constrained), [c.text for c in constrained]
    for completion in constrained:
        if completion.finish_reason == "stop":
            assert parse_react(completion.text).error is None, completion.text


async def test_a_bad_grammar_fails_only_its_request(llm):
    good, bad = await asyncio.gather(
        llm.chat(PROMPT, sampling=Sampling(max_new_tokens=4)),
        llm.chat(PROMPT, sampling=Sampling(max_new_tokens=4, grammar="start: undefined_rule")),
        return_exceptions=True,
    )
    assert isinstance(bad, LLMError) and "grammar" in str(bad)
    assert not isinstance(good, BaseException), good
    assert good[0].prompt_tokens > 0 and good[0].finish_reason in ("stop", "length")
