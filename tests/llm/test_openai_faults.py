"""The openai backend against a faulty server: every fault is retried or categorised, no result is lost, and the
API key never reaches any output (issue 13 item 4 and the fault-injection target)."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.llm import LLMError
from josh.llm.openai import OpenAILLM
from josh.types import ErrorCategory, user
from tests.fault_server import FAULTS, FaultServer

KEY = "sk-josh-fault-test-7f3c9a1e5b"
# The client's exception class that each fault surfaces as, when it is retried.
RETRIED_AS = {
    "500": "InternalServerError",
    "429": "RateLimitError",
    "hang": "APITimeoutError",
    "truncated": "BadResponse",
    "cut": "APIConnectionError",
    "empty": "BadResponse",
}
FAST = {"timeout_s": 0.4, "backoff_s": 0.01, "max_backoff_s": 0.05}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.mark.parametrize("fault", FAULTS)
async def test_each_fault_is_retried_then_the_reply_arrives(fault):
    server = FaultServer(api_key=KEY, schedule=(fault, fault), rate=0.0, hang_s=1.0)
    llm = OpenAILLM("m", base_url=server.url, api_key=KEY, max_retries=2, **FAST)
    try:
        [completion] = await llm.chat([user("hi")])
    finally:
        await llm.aclose()
        server.close()
    assert completion.text == "How else can I help?"
    assert llm.retries == {RETRIED_AS[fault]: 2} and llm.requests_sent == 3
    assert server.log == [fault, fault, "ok"]


async def test_a_fault_past_the_retries_is_an_llm_error_naming_the_fault():
    server = FaultServer(api_key=KEY, schedule=("truncated",) * 3, rate=0.0)
    llm = OpenAILLM("m", base_url=server.url, api_key=KEY, max_retries=2, **FAST)
    try:
        with pytest.raises(LLMError, match="gave up after 3 attempts: BadResponse: the response is not valid JSON"):
            await llm.chat([user("hi")])
    finally:
        await llm.aclose()
        server.close()
    assert llm.usage.errors == 1


async def test_after_a_request_gives_up_one_attempt_decides_until_the_server_answers_again():
    """A server that did not answer through a whole round of retries is taken as gone: the next request is not
    retried (a dead server stops a run after one round, not one per request); rate limits are still retried, and
    once an attempt is answered, retries resume."""
    schedule = ("500",) * 3 + ("cut",) + ("429", "ok") + ("500", "ok")
    server = FaultServer(api_key=KEY, schedule=schedule, rate=0.0)
    llm = OpenAILLM("m", base_url=server.url, api_key=KEY, max_retries=2, **FAST)
    try:
        with pytest.raises(LLMError, match="gave up after 3 attempts: InternalServerError"):
            await llm.chat([user("hi")])
        with pytest.raises(LLMError, match=r"gave up after 1 attempts \(the request before it gave up: not retried\)"):
            await llm.chat([user("hi")])
        assert server.log == ["500"] * 3 + ["cut"]
        for _ in range(2):
            [completion] = await llm.chat([user("hi")])
            assert completion.text == "How else can I help?"
    finally:
        await llm.aclose()
        server.close()
    assert server.log == list(schedule)
    assert llm.usage.errors == 2 and llm.usage.streak == 0


def agent_reply(body: dict) -> dict:
    """Search when the customer spoke, then answer in words once the tool result is in."""
    if body["messages"][-1]["role"] == "tool":
        return {"role": "assistant", "content": "I found a few places in the north. Anything else?"}
    call = {"id": "call_1", "type": "function", "function": {"name": "search_hotel", "arguments": '{"area": "north"}'}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_eval_against_a_server_failing_20_percent_of_requests(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = FaultServer(agent_reply, api_key=KEY, rate=0.2, seed=13, hang_s=1.0, max_requests=600, max_s=120)
    out = tmp_path / "run"
    options = [f"{k}={v}" for k, v in {**FAST, "max_retries": 4}.items()]
    args = ["eval", "--agent", "function_calling", "--backend", "openai", "--model", "fault-model"]
    args += ["--base-url", server.url, "--user", "agenda", "--limit", "8", "--trials", "2", "--concurrency", "4"]
    args += [item for option in options for item in ("--llm-option", option)]
    with caplog.at_level(logging.DEBUG):
        try:
            result = CliRunner().invoke(app, [*args, "--max-turns", "4", "--no-progress", "--out", str(out)])
        finally:
            server.close()
    assert result.exit_code == 0, result.output
    counts = server.counts
    faults = sum(counts[f] for f in FAULTS)
    assert faults >= 10 and counts["unauthorised"] == 0 and counts["over budget"] == 0
    assert {f for f in FAULTS if counts[f]} == set(FAULTS)

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["trial"]) for r in records) == sorted({(r["task_id"], r["trial"]) for r in records})
    assert len(records) == 16
    gave_up = sum(r["errors"].count(ErrorCategory.LLM_ERROR.value) for r in records)
    # Every chat call that did not run out of retries got an answer, and every one that did is categorised. (The
    # server can count an answer the client had already timed out on and retried, on a busy machine: hence >=.)
    assert counts["ok"] >= sum(r["llm_calls"] for r in records) - gave_up
    assert all(r["end_reason"] != "agent_error" for r in records)
    for text in (result.output, caplog.text, *(p.read_text() for p in out.iterdir())):
        assert KEY not in text
