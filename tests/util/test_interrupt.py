"""SIGTERM stops eval and rollout like Ctrl-C (summary.json / stats.json written), and wall time adds up over the
sessions of a resumed run (issue 13 item 9)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from josh.eval.evaluate import evaluate
from josh.search.rollout import run_rollouts
from tests.fakes.conversation import CallingAgent, CountingUser, FakeEnv, make_tasks
from tests.fakes.process import start_josh


class Clock:
    """A stand-in for ``time`` whose ``perf_counter`` moves only when a ``SlowAgent`` takes a turn."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class SlowAgent(CallingAgent):
    """Takes ``delay`` seconds per turn (on ``clock`` too, when given) and sends this process SIGTERM once ``after``
    turns were taken."""

    def __init__(self, delay: float, after: int | None = None, clock: Clock | None = None) -> None:
        super().__init__()
        self.delay, self.after, self.turns, self.clock = delay, after, 0, clock

    async def turn(self, history, state, *, n=1):
        await asyncio.sleep(self.delay)
        if self.clock is not None:
            self.clock.now += self.delay
        self.turns += 1
        if self.turns == self.after:
            os.kill(os.getpid(), signal.SIGTERM)
        return await super().turn(history, state, n=n)


@pytest.fixture
def sigterm_guard():
    """Should the runner not take SIGTERM over, fail the test instead of killing pytest."""
    hits: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: hits.append(1))
    yield hits
    signal.signal(signal.SIGTERM, previous)


async def test_sigterm_during_eval_writes_the_summary_and_resume_adds_up_the_time(tmp_path, sigterm_guard, monkeypatch):
    """The sessions' wall time is read from a clock that moves 0.05 s per agent turn: the interrupted session's time is
    its turns', and the resumed run's total is every turn's of both sessions."""
    import josh.run.resumable

    clock = Clock()
    monkeypatch.setattr(josh.run.resumable, "time", clock)
    tasks = make_tasks(6)
    interrupted = SlowAgent(0.05, after=3, clock=clock)
    with pytest.raises(KeyboardInterrupt):
        await evaluate(FakeEnv(), tasks, interrupted, CountingUser(1), tmp_path, concurrency=1)
    assert not sigterm_guard
    first = json.loads((tmp_path / "summary.json").read_text())
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert 2 <= first["conversations"] == len(lines) < 6
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the guard is back in place
    assert first["wall_s"] == pytest.approx(0.05 * interrupted.turns)
    resumed = SlowAgent(0.05, clock=clock)
    summary = await evaluate(FakeEnv(), tasks, resumed, CountingUser(1), tmp_path, concurrency=1)
    assert summary.conversations == 6 and resumed.turns > 0
    assert summary.wall_s == pytest.approx(0.05 * (interrupted.turns + resumed.turns))


async def test_sigterm_during_rollout_writes_stats_and_resume_adds_up_the_time(tmp_path, sigterm_guard):
    tasks = make_tasks(6)
    with pytest.raises(KeyboardInterrupt):
        await run_rollouts(tasks, FakeEnv(), SlowAgent(0.05, after=3), CountingUser(1), tmp_path, progress=False)
    assert not sigterm_guard
    first = json.loads((tmp_path / "stats.json").read_text())
    assert first["wall_s"] == first["session_wall_s"] > 0
    again = await run_rollouts(tasks, FakeEnv(), SlowAgent(0.05), CountingUser(1), tmp_path, progress=False)
    assert again.tasks == 6 and again.skipped_finished == first["tasks"]
    assert again.wall_s == pytest.approx(first["wall_s"] + again.session_wall_s, abs=0.002)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_josh_eval_stops_on_sigterm_as_on_ctrl_c(tmp_path, stop):
    out = tmp_path / "run"
    reply = 'Action: {"name": "respond", "arguments": {"content": "Hello?"}}'
    args = ["eval", "--agent", "act", "--backend", "scripted", "--model", "x"]
    args += ["--llm-option", f"replies=[{reply!r}]", "--llm-option", "latency_s=0.2", "--user", "agenda"]
    args += ["--limit", "8", "--concurrency", "1", "--no-progress", "--out", str(out)]
    process = start_josh(args)
    try:
        deadline = time.monotonic() + 60
        while not (out / "results.jsonl").is_file() or not (out / "results.jsonl").read_text().strip():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(stop)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130 and "Traceback" not in output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conversations"] == len((out / "results.jsonl").read_text().splitlines()) < 8


def test_outside_the_main_thread_sigterm_is_left_alone(tmp_path):
    """An evaluation run in a worker thread (no signal handlers there) still runs and writes its summary."""
    import threading

    done = []

    def work():
        done.append(asyncio.run(evaluate(FakeEnv(), make_tasks(2), CallingAgent(), CountingUser(1), tmp_path)))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert done and done[0].conversations == 2 and (tmp_path / "summary.json").is_file()
