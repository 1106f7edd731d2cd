"""Serving a trained adapter: the openai backend pointed at a ``vllm serve --lora-modules josh=...`` endpoint.

A fake OpenAI-compatible server on 127.0.0.1 stands in for vLLM; it answers every request with a ReACT SPEAK and
records the request bodies, so the tests can check which model name each component asked for.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.run.components import ComponentOptions, build_components
from tests.llm.test_openai import FakeServer


class SpeakServer(FakeServer):
    """Every choice is a polite ReACT SPEAK."""

    @staticmethod
    def choice(behaviour: str, body: dict, i: int) -> dict:
        text = "PLAN greet the customer <COMMAND_END> SPEAK How can I help you today? <COMMAND_END>"
        return {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}


@pytest.fixture
def vllm_server(monkeypatch):
    """A stand-in for ``vllm serve BASE --enable-lora --lora-modules josh=checkpoints/<run>``."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = SpeakServer()
    yield server
    server.close()


def test_eval_talks_to_the_served_adapter_by_name(vllm_server, tmp_path) -> None:
    args = ["eval", "--out", str(tmp_path), "--backend", "openai", "--model", "josh", "--base-url", vllm_server.url]
    args += ["--agent", "react", "--user", "agenda", "--limit", "2", "--max-turns", "2", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert vllm_server.bodies and {b["model"] for b in vllm_server.bodies} == {"josh"}
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    spoken = [m for m in vllm_server.bodies[-1]["messages"] if m["role"] == "assistant"]
    assert any("How can I help" in m["content"] for m in spoken)


def test_user_llm_shares_the_agents_endpoint_only_when_it_shares_the_model(vllm_server) -> None:
    shared = build_components(
        ComponentOptions(backend="openai", model="josh", base_url=vllm_server.url, user="goal", limit=1)
    )
    assert len(shared.llms) == 1
    other = SpeakServer()
    try:
        split = build_components(
            ComponentOptions(
                backend="openai",
                model="josh",
                base_url=vllm_server.url,
                user="goal",
                user_model="judge",
                user_base_url=other.url,
                limit=1,
            )  # fmt: skip
        )
        assert [llm.model for llm in split.llms] == ["josh", "judge"]
        assert [llm.base_url for llm in split.llms] == [vllm_server.url, other.url]
    finally:
        other.close()


def test_a_base_url_with_a_local_backend_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="only applies to the openai backend"):
        build_components(ComponentOptions(backend="hf", base_url="http://127.0.0.1:1/v1", limit=1))
