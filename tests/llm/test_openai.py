"""The openai backend against a small OpenAI-compatible server on 127.0.0.1 that the tests script."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from josh.llm import LLMError, Sampling, make_llm
from josh.llm.openai import DEFAULT_PRICES, OpenAILLM, price_of
from josh.run.components import Components
from josh.types import system, user
from tests.fault_server import send_raw


class FakeServer:
    """Answers /v1/chat/completions from a queue of behaviours (default: a plain text reply)."""

    def __init__(self) -> None:
        self.behaviours: list[str] = []
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                    behaviour = server.behaviours.pop(0) if server.behaviours else "text"
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    server.respond(self, behaviour, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A client that stops a run drops its open connections; that is not the server's error to print.
        self.httpd.handle_error = lambda request, client_address: None
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def respond(self, handler, behaviour: str, body: dict) -> None:
        n = body.get("n", 1)
        if behaviour == "500":
            return self.send(handler, 500, {"error": {"message": "boom"}})
        if behaviour == "429":
            return self.send(handler, 429, {"error": {"message": "slow down"}}, {"retry-after": "0"})
        if behaviour == "401":
            return self.send(handler, 401, {"error": {"message": "bad key"}})
        if behaviour == "reject_n" and n > 1:
            return self.send(handler, 400, {"error": {"message": "n must be 1"}})
        if behaviour == "sleep":
            time.sleep(1.0)
        if behaviour == "slow":
            time.sleep(0.1)
        if behaviour == "single":
            n = 1
        choices = [self.choice(behaviour, body, i) for i in range(n)]
        usage = {"prompt_tokens": 100, "completion_tokens": 10 * n, "total_tokens": 100 + 10 * n}
        self.send(
            handler,
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": choices,
                "usage": usage,
            },
        )

    @staticmethod
    def choice(behaviour: str, body: dict, i: int) -> dict:
        if behaviour == "tools":
            calls = [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "find_hotel", "arguments": '{"area": "north"}'},
                },
                {"id": "call_b", "type": "function", "function": {"name": "book", "arguments": "{not json"}},
            ]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            return {"index": i, "message": message, "finish_reason": "tool_calls"}
        text = f"reply {i} seed={body.get('seed')}"
        return {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}

    @staticmethod
    def send(handler, status: int, payload: dict, headers: dict | None = None) -> None:
        send_raw(handler, status, json.dumps(payload).encode(), headers=headers)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    s = FakeServer()
    yield s
    s.close()


def backend(server: FakeServer, **options) -> OpenAILLM:
    options = {"max_retries": 3, "timeout_s": 5.0, "backoff_s": 0.01, **options}
    return OpenAILLM("gpt-4o-mini", base_url=server.url, **options)


async def test_text_reply_usage_and_cost(server):
    llm = backend(server)
    [c] = await llm.chat([system("s"), user("hi")], sampling=Sampling(temperature=0.3, seed=7, stop=["\n"]))
    assert c.text == "reply 0 seed=7" and c.finish_reason == "stop"
    body = server.bodies[0]
    assert body["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.3 and body["seed"] == 7 and body["stop"] == ["\n"] and "n" not in body
    prompt_price, completion_price = DEFAULT_PRICES["gpt-4o-mini"]
    assert c.cost == pytest.approx((100 * prompt_price + 10 * completion_price) / 1e6)
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens == 100 and llm.usage.completion_tokens == 10


def test_a_run_closes_the_http_client_inside_its_event_loop(server):
    """Closed before ``asyncio.run`` ends, not at garbage collection after it ("Event loop is closed")."""
    llm = backend(server)
    built = Components(env=None, tasks=[], agent=None, user=None, llms=[llm])

    async def work():
        await llm.chat([user("hi")])
        return llm._client

    client = built.run(work())
    assert client.is_closed() and llm._client is None


async def test_reasoning_models_get_max_completion_tokens_and_no_temperature(server):
    sampling = Sampling(temperature=0.7, top_p=0.9, max_new_tokens=33)
    await backend(server).chat([user("hi")], sampling=sampling)
    await OpenAILLM("o3-mini", base_url=server.url).chat([user("hi")], sampling=sampling)
    await OpenAILLM("my-local-o1-finetune", base_url=server.url, reasoning=True).chat([user("hi")], sampling=sampling)
    chat, reasoning, forced = server.bodies
    assert chat["max_tokens"] == 33 and chat["temperature"] == 0.7 and chat["top_p"] == 0.9
    assert "max_completion_tokens" not in chat
    for body in (reasoning, forced):
        assert body["max_completion_tokens"] == 33
        assert not {"max_tokens", "temperature", "top_p"} & body.keys()


async def test_native_tool_calls_parsed_and_bad_json_kept_raw(server):
    server.behaviours = ["tools"]
    tools = [{"type": "function", "function": {"name": "find_hotel", "parameters": {"type": "object"}}}]
    [c] = await backend(server).chat([user("hotel")], tools=tools)
    assert server.bodies[0]["tools"] == tools
    assert c.finish_reason == "tool_calls" and c.text == ""
    assert c.tool_calls[0].name == "find_hotel" and c.tool_calls[0].arguments == {"area": "north"}
    assert c.tool_calls[1].arguments == "{not json"


async def test_n_forwarded_and_prompt_counted_once(server):
    llm = backend(server)
    out = await llm.chat([user("hi")], n=3)
    assert server.bodies[0]["n"] == 3 and len(server.bodies) == 1
    assert [c.text for c in out] == ["reply 0 seed=None", "reply 1 seed=None", "reply 2 seed=None"]
    assert [c.prompt_tokens for c in out] == [100, 0, 0]
    assert llm.usage.prompt_tokens == 100 and llm.usage.completion_tokens == 30


async def test_server_rejecting_n_falls_back_to_single_requests_with_distinct_seeds(server):
    server.behaviours = ["reject_n"] * 10
    llm = backend(server)
    out = await llm.chat([user("hi")], n=3, sampling=Sampling(seed=5))
    assert len(out) == 3 and not llm.supports_n
    assert sorted(c.text for c in out) == ["reply 0 seed=5", "reply 0 seed=6", "reply 0 seed=7"]
    await llm.chat([user("again")], n=2)
    assert all("n" not in body for body in server.bodies[4:])


async def test_server_returning_fewer_choices_is_topped_up(server):
    server.behaviours = ["single"] * 5
    out = await backend(server).chat([user("hi")], n=3)
    assert len(out) == 3 and len(server.bodies) == 3


async def test_retries_500_then_succeeds(server):
    server.behaviours = ["500", "500", "text"]
    llm = backend(server)
    [c] = await llm.chat([user("hi")])
    assert c.text.startswith("reply 0") and llm.requests_sent == 3


async def test_retries_429(server):
    server.behaviours = ["429", "text"]
    llm = backend(server)
    await llm.chat([user("hi")])
    assert llm.requests_sent == 2


async def test_gives_up_after_max_retries(server):
    server.behaviours = ["500"] * 10
    llm = backend(server, max_retries=2)
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        await llm.chat([user("hi")])
    assert llm.requests_sent == 3 and llm.usage.errors == 1


async def test_client_errors_fail_without_retry(server):
    server.behaviours = ["401"]
    llm = backend(server)
    with pytest.raises(LLMError, match="AuthenticationError"):
        await llm.chat([user("hi")])
    assert llm.requests_sent == 1


async def test_timeout_is_retried_then_raised(server):
    server.behaviours = ["sleep", "sleep"]
    llm = backend(server, max_retries=1, timeout_s=0.2)
    with pytest.raises(LLMError, match="Timeout"):  # the server answers after 1 s: only the timeout raises this
        await llm.chat([user("hi")])
    assert llm.requests_sent == 2


async def test_connection_refused_becomes_llm_error():
    llm = OpenAILLM("m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(LLMError, match="Connection"):
        await llm.chat([user("hi")])


async def test_concurrency_limit(server):
    import asyncio

    server.behaviours = ["slow"] * 8
    llm = backend(server, max_concurrency=3)
    await asyncio.gather(*(llm.chat([user(str(i))]) for i in range(8)))
    assert server.peak <= 3 and len(server.bodies) == 8


def test_prices_longest_prefix_and_unknown_model():
    assert price_of("gpt-4o-mini-2024-07-18", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_of("gpt-4o-2024-08-06", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o"]
    assert price_of("meta-llama/Llama-3-8B", DEFAULT_PRICES) == (0.0, 0.0)


def test_api_key_required_without_base_url(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAILLM("gpt-4o")
    assert OpenAILLM("local", base_url="http://127.0.0.1:1/v1")._api_key == "EMPTY"


def test_factory_builds_openai(server):
    llm = make_llm("openai", "served-model", base_url=server.url, max_concurrency=4, prices={"served": (1.0, 1.0)})
    assert isinstance(llm, OpenAILLM) and llm.max_concurrency == 4
    assert price_of(llm.model, llm.prices) == (1.0, 1.0)


async def test_grammar_goes_to_compatible_servers_only(server, monkeypatch):
    await backend(server).chat([user("hi")], sampling=Sampling(top_k=5, grammar='start: "x"'))
    assert server.bodies[0]["structured_outputs"] == {"grammar": 'start: "x"'} and server.bodies[0]["top_k"] == 5
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(LLMError, match="no grammar"):
        await OpenAILLM("gpt-4o-mini").chat([user("hi")], sampling=Sampling(grammar='start: "x"'))
