import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.llm import LLMError
from josh.llm.batcher import Batcher


def doubler(batches: list):
    def run(items):
        batches.append(list(items))
        return [item * 2 for item in items]

    return run


async def test_concurrent_submissions_share_a_batch():
    batches: list = []
    batcher = Batcher(doubler(batches), max_batch_size=16, window_s=0.05)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(10)))
    assert results == [2 * i for i in range(10)]
    assert batches == [list(range(10))] and batcher.batches == 1
    batcher.close()


@settings(deadline=None, max_examples=25)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=12), st.integers(5, 9))
def test_weights_never_exceed_max_batch_size(weights, limit):
    batches: list = []
    batcher = Batcher(doubler(batches), max_batch_size=limit, window_s=0.02, weight=lambda w: w)

    async def main():
        return await asyncio.gather(*(batcher.submit(w) for w in weights))

    assert asyncio.run(main()) == [2 * w for w in weights]
    assert all(sum(b) <= limit for b in batches)
    assert sorted(w for b in batches for w in b) == sorted(weights)
    batcher.close()


async def test_per_item_exceptions_and_failed_batches():
    def run(items):
        if "crash" in items:
            raise RuntimeError("device fell over")
        return [LLMError("bad item") if item == "bad" else item.upper() for item in items]

    batcher = Batcher(run, max_batch_size=8, window_s=0.05)
    good, bad = await asyncio.gather(batcher.submit("ok"), batcher.submit("bad"), return_exceptions=True)
    assert good == "OK" and isinstance(bad, LLMError)
    with pytest.raises(LLMError, match="RuntimeError: device fell over"):
        await batcher.submit("crash")
    assert await batcher.submit("still alive") == "STILL ALIVE"
    batcher.close()


async def test_event_loop_stays_responsive_while_a_batch_runs():
    release = threading.Event()

    def run(items):
        release.wait(5)
        return list(items)

    batcher = Batcher(run, max_batch_size=4, window_s=0.0)
    task = asyncio.ensure_future(batcher.submit("x"))
    await asyncio.sleep(0.05)
    assert not task.done()
    release.set()
    assert await task == "x"
    batcher.close()


async def test_cancelled_request_is_skipped():
    seen: list = []
    gate = threading.Event()

    def run(items):
        seen.extend(items)
        gate.wait(5)
        return list(items)

    batcher = Batcher(run, max_batch_size=1, window_s=0.0)
    first = asyncio.ensure_future(batcher.submit("first"))
    while not seen:  # the worker is now blocked inside the first batch
        await asyncio.sleep(0.01)
    second = asyncio.ensure_future(batcher.submit("second"))
    await asyncio.sleep(0.01)
    second.cancel()
    await asyncio.sleep(0.05)  # the cancellation reaches the queued request through the event loop
    gate.set()
    assert await first == "first"
    third = await batcher.submit("third")
    assert third == "third" and seen == ["first", "third"]
    batcher.close()


def test_invalid_size():
    with pytest.raises(ValueError):
        Batcher(lambda items: items, max_batch_size=0)


def test_close_with_cancel_stops_a_running_batch_and_fails_the_queued_requests():
    started = threading.Event()

    def generate(items):  # like the hf backend: works until told to stop
        started.set()
        batcher.cancelled.wait(5)
        return list(items)

    batcher: Batcher = Batcher(generate, max_batch_size=1)

    async def main():
        running = asyncio.ensure_future(batcher.submit("running"))
        queued = asyncio.ensure_future(batcher.submit("queued"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        await asyncio.get_running_loop().run_in_executor(None, lambda: batcher.close(cancel=True))
        return await asyncio.gather(running, queued, return_exceptions=True)

    running, queued = asyncio.run(main())
    assert running == "running", "the batch that was being served finished early, as its run function was told"
    assert isinstance(queued, LLMError) and "stopped" in str(queued)
    assert batcher._thread is None
