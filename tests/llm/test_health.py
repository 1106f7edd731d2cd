"""The failure policy (``josh.llm.health``): when a backend counts as down, and which settings say so."""

from __future__ import annotations

import asyncio

import pytest

from josh.core.llm import LLMError, failures_noted
from josh.llm.health import BackendDownError, FailurePolicy, failing_backend, stop_if_failing
from josh.llm.scripted import ScriptedLLM
from josh.types import user


def backend(outcomes: str) -> ScriptedLLM:
    """A scripted backend that has answered (``o``) or failed (``x``) requests in this order."""
    llm = ScriptedLLM(["ok"])
    for outcome in outcomes:
        llm.usage.add([]) if outcome == "o" else llm.usage.failed(LLMError(f"boom {len(llm.usage.recent)}"))
    return llm


def test_failures_in_a_row_stop_the_run_and_an_answer_resets_the_count() -> None:
    policy = FailurePolicy(max_consecutive=3, window=100)
    assert failing_backend([backend("oxxoxx")], policy) is None
    problem = failing_backend([backend("oxxoxxx")], policy)
    assert problem is not None and "3 requests in a row failed" in problem and "Last error: boom 6" in problem


def test_a_failed_share_over_the_window_stops_the_run_once_the_window_is_full() -> None:
    policy = FailurePolicy(max_consecutive=100, window=10, max_share=0.5)
    assert failing_backend([backend("xoxoxox")], policy) is None  # the window is not full yet
    assert failing_backend([backend("ooooo" + "xoxoxoxoxo")], policy) is None  # 5 of 10: not over half
    problem = failing_backend([backend("oxxoxxoxxo")], policy)
    assert problem is not None and "6 of its last 10 requests failed" in problem


def test_a_backend_that_never_answered_is_down_after_three_and_a_run_ending_on_failures_too() -> None:
    assert "all 3 requests failed, none answered" in (failing_backend([backend("xxx")]) or "")
    assert failing_backend([backend("ox")]) is None
    assert "the last ones of the run" in (failing_backend([backend("ox")], ended=True) or "")
    assert failing_backend([backend("xo")], ended=True) is None
    with pytest.raises(BackendDownError, match="scripted is down"):
        stop_if_failing([backend("xxxxx")])


def test_an_answer_to_a_request_sent_before_a_failure_does_not_end_the_streak() -> None:
    """Requests end out of order: one sent before the backend died may be answered after a later one failed (the
    flake a fresh clone met: two in flight, the server gone, and the run took the late answer for a recovery)."""
    usage = ScriptedLLM(["ok"]).usage
    early, late = usage.ticket(), usage.ticket()
    usage.failed(LLMError("connection refused"), late)
    usage.add([], early)
    assert usage.streak == 1 and list(usage.recent) == [False, True]
    usage.add([], usage.ticket())  # sent after the failure: the backend answers again
    assert usage.streak == 0


async def test_a_run_whose_last_sent_request_failed_ends_down_whatever_order_the_answers_came_in() -> None:
    gate = asyncio.Event()

    async def policy(messages, tools, index):
        if messages[-1].content == "slow":
            await gate.wait()  # answered once the later request has failed
            return "ok"
        gate.set()
        raise LLMError("connection refused")

    llm = ScriptedLLM(policy)
    outcomes = await asyncio.gather(llm.chat([user("slow")]), llm.chat([user("fast")]), return_exceptions=True)
    assert [type(o).__name__ for o in outcomes] == ["list", "LLMError"]
    assert "the last ones of the run" in (failing_backend([llm], ended=True) or "")


def test_the_thresholds_come_from_the_environment(monkeypatch) -> None:
    assert FailurePolicy.from_env() == FailurePolicy()
    monkeypatch.setenv("JOSH_MAX_CONSECUTIVE_FAILURES", "2")
    monkeypatch.setenv("JOSH_FAILURE_WINDOW", "4")
    monkeypatch.setenv("JOSH_MAX_FAILURE_SHARE", "0.25")
    assert FailurePolicy.from_env() == FailurePolicy(max_consecutive=2, window=4, max_share=0.25)
    assert failing_backend([backend("oxox")]) is not None  # 2 of 4 > 0.25
    monkeypatch.setenv("JOSH_FAILURE_WINDOW", "0")
    with pytest.raises(ValueError, match="JOSH_FAILURE_WINDOW='0'"):
        FailurePolicy.from_env()


def test_failed_requests_are_noted_for_the_piece_of_work_they_belong_to() -> None:
    def policy(messages, tools, index):
        if "fail" in messages[-1].content:
            raise LLMError("the server went away")
        return "fine"

    llm = ScriptedLLM(policy)

    async def piece(text: str) -> list[str]:
        with failures_noted() as noted:
            await asyncio.gather(*(llm.chat([user(text)]) for _ in range(2)), return_exceptions=True)
        return noted

    async def both() -> list[list[str]]:
        return list(await asyncio.gather(piece("fail please"), piece("hello")))

    failed, fine = asyncio.run(both())
    assert failed == ["the server went away"] * 2 and fine == []
    assert llm.usage.errors == 2 and llm.usage.calls == 2


def test_the_ray_driver_sees_one_outcome_per_tree() -> None:
    from josh.search.distributed import ActorBackends
    from josh.search.tree import Tree

    backends = ActorBackends("openai:m on the Ray actors")
    for failed in (None, "llm_error: refused", "llm_error: refused", "llm_error: refused", "llm_error: refused"):
        backends.saw(Tree(task_id="t", failed=failed))
    assert failing_backend([backends]) is None
    backends.saw(Tree(task_id="t", failed="llm_error: refused"))
    with pytest.raises(
        BackendDownError, match=r"openai:m on the Ray actors is down: 5 requests .* Last error: refused"
    ):
        stop_if_failing([backends])
