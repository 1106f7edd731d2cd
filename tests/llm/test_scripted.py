import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from josh.llm import LLM, Completion, LLMConfig, LLMError, Sampling, make_llm
from josh.llm.factory import OpenAIConfig
from josh.llm.scripted import ScriptedLLM, count_tokens
from josh.types import ToolCall, assistant, system, user


def awaited_latencies(monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM) -> list[tuple[float, int]]:
    """Each latency ``llm`` awaits, with its requests in flight as it starts awaiting it."""
    awaited: list[tuple[float, int]] = []
    sleep = asyncio.sleep

    async def recorded(seconds: float) -> None:
        awaited.append((seconds, llm.in_flight))
        await sleep(seconds)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    return awaited


async def test_latency_overlaps_for_concurrent_requests(monkeypatch):
    """Twenty requests of 100 ms overlap: every one is awaiting its latency before the first returns (checked by the
    count in flight, not by a wall-clock bound, which measures the machine)."""
    llm = ScriptedLLM(["ok"], latency_s=0.1)
    latencies = awaited_latencies(monkeypatch, llm)
    await asyncio.gather(*(llm.chat([user(f"q{i}")]) for i in range(20)))
    assert latencies == [(0.1, i) for i in range(1, 21)]
    assert llm.peak_in_flight == 20
    assert llm.in_flight == 0


async def test_concurrency_limit_serialises_requests(monkeypatch):
    """Six requests, two at a time: each awaits its latency with at most two in flight."""
    llm = ScriptedLLM(["ok"], latency_s=0.05, max_concurrency=2)
    latencies = awaited_latencies(monkeypatch, llm)
    await asyncio.gather(*(llm.chat([user("q")]) for i in range(6)))
    assert [seconds for seconds, _ in latencies] == [0.05] * 6
    assert max(in_flight for _, in_flight in latencies) == 2
    assert llm.peak_in_flight == 2
    assert llm.in_flight == 0


async def test_n_samples_call_policy_with_sample_index():
    seen = []

    def policy(messages, tools, index):
        seen.append(index)
        return f"{messages[-1].content} #{index}"

    llm = ScriptedLLM(policy)
    out = await llm.chat([system("s"), user("hello")], n=4)
    assert [c.text for c in out] == [f"hello #{i}" for i in range(4)]
    assert seen == [0, 1, 2, 3]


async def test_canned_replies_cycle_across_calls():
    llm = ScriptedLLM(["a", "b", "c"])
    first = await llm.chat([user("x")], n=2)
    second = await llm.chat([user("x")], n=2)
    assert [c.text for c in first + second] == ["a", "b", "c", "a"]


async def test_request_log_and_usage():
    llm = ScriptedLLM(["one two three"])
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    sampling = Sampling(temperature=0.5, seed=3)
    await llm.chat([user("four words are here")], tools=tools, n=2, sampling=sampling)
    [request] = llm.requests
    assert request.n == 2 and request.tools == tools and request.sampling.seed == 3
    assert request.messages[0].content == "four words are here"
    assert llm.usage.calls == 1
    assert llm.usage.prompt_tokens == 4, "the prompt is counted once per request"
    assert llm.usage.completion_tokens == 6


async def test_completion_policy_keeps_tool_calls_and_async_policy():
    call = ToolCall(name="find_restaurant", arguments={"area": "centre"})

    async def policy(messages, tools, index):
        await asyncio.sleep(0)
        return Completion(tool_calls=[call], finish_reason="tool_calls")

    out = await ScriptedLLM(policy).chat([user("food")])
    assert out[0].tool_calls == [call] and out[0].finish_reason == "tool_calls"


async def test_stop_strings_and_max_new_tokens():
    llm = ScriptedLLM(["Thought: look up\nAction: x\nObservation: y"])
    [out] = await llm.chat([user("q")], sampling=Sampling(stop=["Observation:"]))
    assert out.text == "Thought: look up\nAction: x\n" and out.finish_reason == "stop"
    [out] = await llm.chat([user("q")], sampling=Sampling(max_new_tokens=2))
    assert out.text == "Thought: look" and out.finish_reason == "length" and out.completion_tokens == 2


async def test_llm_error_counts_and_propagates():
    def policy(messages, tools, index):
        raise LLMError("scripted failure")

    llm = ScriptedLLM(policy)
    with pytest.raises(LLMError):
        await llm.chat([user("q")])
    assert llm.usage.errors == 1


async def test_bad_policy_return_type_is_reported():
    llm = ScriptedLLM(lambda m, t, i: 42)
    with pytest.raises(TypeError, match="str or Completion"):
        await llm.chat([user("q")])


def test_invalid_construction():
    with pytest.raises(ValueError, match="at least one"):
        ScriptedLLM([])
    with pytest.raises(ValueError):
        ScriptedLLM(["a"], latency_s=-1)
    with pytest.raises(ValueError):
        ScriptedLLM(["a"], max_concurrency=0)


async def test_works_across_event_loops():
    llm = ScriptedLLM(["a"], max_concurrency=1)
    assert (await llm.chat([user("q")]))[0].text == "a"
    result = await asyncio.to_thread(asyncio.run, llm.chat([user("q")]))
    assert result[0].text == "a"


@given(st.lists(st.text(alphabet=st.sampled_from("ab \n"), max_size=30), min_size=1, max_size=5))
def test_count_tokens_matches_words(texts):
    assert sum(count_tokens(t) for t in texts) == sum(len(t.split()) for t in texts)


def test_factory_builds_scripted_and_checks_options():
    llm = make_llm("scripted", policy=lambda m, t, i: "x", latency_s=0.01)
    assert isinstance(llm, LLM) and isinstance(llm, ScriptedLLM)
    assert isinstance(make_llm("scripted", replies=["a"]), ScriptedLLM)
    with pytest.raises(ValueError, match="needs canned replies: --llm-option"):
        make_llm("scripted")
    with pytest.raises(ValueError, match=r"unknown option temperature for the scripted backend \(--llm-option"):
        make_llm("scripted", replies=["a"], temperature=0.3)
    with pytest.raises(ValueError, match="bad option max_batch_size='many' for the hf backend"):
        make_llm("hf", max_batch_size="many")
    with pytest.raises(
        ValueError, match=r"unknown backend 'gpt' \(--backend\); choose one of hf, vllm, openai, scripted"
    ):
        make_llm("gpt")
    with pytest.raises(ValueError, match="needs --model"):
        make_llm("openai")
    with pytest.raises(ValueError, match=r"unknown option load_in_4bit \(an option of hf\) for the openai backend"):
        make_llm("openai", "gpt-4o-mini", load_in_4bit=True)
    with pytest.raises(ValueError, match="only applies"):
        make_llm("openai", "gpt-4o-mini", policy=lambda m, t, i: "x")


def test_config_round_trips_through_yaml_like_dict():
    configs = TypeAdapter(LLMConfig)
    config = configs.validate_python(
        {"backend": "openai", "model": "m", "base_url": "http://x/v1", "prices": {"m": [1, 2]}}
    )
    assert isinstance(config, OpenAIConfig) and configs.validate_python(config.model_dump()) == config
    assert config.prices == {"m": (1.0, 2.0)}
    with pytest.raises(ValidationError, match="load_in_4bit"):
        configs.validate_python({"backend": "openai", "model": "m", "load_in_4bit": True})


async def test_history_with_tool_calls_counts_arguments():
    llm = ScriptedLLM(["ok"])
    history = [user("a b"), assistant(None, [ToolCall(name="f", arguments={"k": "v w"})])]
    await llm.chat(history)
    assert llm.usage.prompt_tokens > 2
