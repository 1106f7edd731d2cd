"""A prompt longer than the served model's context, behind ``josh serve`` (slow, issue 66): ``transformers serve``
answers one with HTTP 200 and text generated past the model's positions, so the openai backend counts each prompt
with the served folder's tokenizer before sending it. Against the real server (the SmolLM2 one ``conftest.py``
shares): the count is the server's own, an over-long prompt is refused unsent, and a ``josh eval`` whose prompts
are over ``max_prompt_tokens`` finishes with every conversation ended ``context_length``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import ModelServer
from josh.core.llm import ContextLengthError, Sampling
from josh.llm.factory import make_llm
from josh.types import user
from tests.cli.conftest import loopback_env
from tests.training_data import FIND_TOOL

pytestmark = pytest.mark.slow
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

GREEDY = Sampling(temperature=0.0, max_new_tokens=8)
SMOLLM2_CONTEXT = 8192


@pytest.fixture(scope="module")
def server(smollm2_server: ModelServer) -> Iterator[ModelServer]:
    with loopback_env():
        yield smollm2_server


def requests_seen(server: ModelServer) -> int:
    """Chat requests the server has received so far, answered or not, from its access log."""
    assert server.log_path is not None, "the server needs a log"
    return server.log_path.read_text(errors="replace").count('"POST /v1/chat/completions')


def test_the_backend_counts_as_the_server_does_and_never_sends_a_prompt_over_the_context(server) -> None:
    before = requests_seen(server)
    counted, answer, refused = asyncio.run(_ask(server))
    assert answer.text and answer.prompt_tokens == counted  # the server's own count of the prompt, tools included
    assert refused.value.args[0].startswith("prompt has ")
    assert f"context {SMOLLM2_CONTEXT} minus max_new_tokens 8" in str(refused.value)
    assert requests_seen(server) == before + 1, "the over-long prompt was never sent"


async def _ask(server: ModelServer) -> tuple[int | None, object, pytest.ExceptionInfo]:
    llm = make_llm("openai", server.model, base_url=server.base_url, timeout_s=600, max_retries=0)
    messages = [user("Find me a Chinese restaurant in the centre.")]
    try:
        [answer] = await llm.chat(messages, tools=[FIND_TOOL], sampling=GREEDY)
        with pytest.raises(ContextLengthError) as refused:
            await llm.chat([user("word " * 9000)], sampling=GREEDY)
        counted = await asyncio.to_thread(llm.counter.check, messages, [FIND_TOOL], GREEDY.max_new_tokens)
    finally:
        await llm.aclose()
    assert (llm.usage.calls, llm.usage.errors, llm.usage.overflows) == (1, 0, 1)
    return counted, answer, refused


def test_josh_eval_through_the_server_ends_over_long_conversations_with_context_length(server, tmp_path) -> None:
    """The function-calling agent's first prompt (its tools and the user's opening, about 1,800 tokens) over
    ``max_prompt_tokens=1500``: both conversations end ``context_length``, finished, and the server is asked nothing."""
    out = tmp_path / "eval"
    args = ["eval", "--backend", "openai", "--base-url", server.base_url, "--model", server.model, "--out", str(out)]
    args += ["--agent", "function_calling", "--user", "agenda", "--limit", "2", "--max-turns", "2", "--no-progress"]
    args += ["--max-new-tokens", "8", "--llm-option", "max_prompt_tokens=1500", "--llm-option", "timeout_s=600"]
    before = requests_seen(server)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["end_reason"] for r in records} == {"context_length"}
    assert not any(r.get("failed") for r in records)
    assert all("over the limit of 1500 (max_prompt_tokens=1500" in r["error"] for r in records)
    summary = json.loads((Path(out) / "summary.json").read_text())
    assert summary["end_reasons"] == {"context_length": 2} and summary["failed"] == 0 and summary["pending"] == 0
    assert requests_seen(server) == before
