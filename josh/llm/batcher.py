"""Gather concurrent requests into batches served by one blocking function on a worker thread.

The local backends (hf, vllm) submit each ``chat`` request here. A daemon thread takes the first waiting request,
keeps collecting for a short window (or until the batch reaches ``max_batch_size`` in weight, e.g. sequences), and
hands the whole batch to ``run``. While ``run`` works, new requests queue up and form the next batch. The event
loop only awaits futures, so it stays responsive, and the batcher works from any event loop or thread.

``close(cancel=True)`` (Ctrl-C) fails the queued requests, sets ``cancelled`` so a ``run`` that watches it can stop
early (the hf backend stops generating at the next token), and joins the thread: the interpreter must not exit
while the thread is inside native code, which aborts the process.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from josh.core.llm import LLMError

log = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")

BatchFn = Callable[[Sequence[R]], Sequence["T | BaseException"]]


@dataclass
class _Pending(Generic[R, T]):
    item: R
    future: Future[T] = field(default_factory=Future)


class Batcher(Generic[R, T]):
    """Serve ``submit``-ted items in batches with ``run`` (one result or exception per item, in order)."""

    def __init__(
        self,
        run: BatchFn,
        *,
        max_batch_size: int,
        window_s: float = 0.01,
        weight: Callable[[R], int] = lambda _item: 1,
        name: str = "josh-batcher",
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self._run = run
        self.max_batch_size = max_batch_size
        self.window_s = window_s
        self._weight = weight
        self._name = name
        self._queue: queue.Queue[_Pending[R, T] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.cancelled = threading.Event()
        self.batches = 0
        self.batch_sizes: list[int] = []

    async def submit(self, item: R) -> T:
        """Queue one item and wait for its result (raises what ``run`` raised for it)."""
        pending: _Pending[R, T] = _Pending(item)
        self._ensure_thread()
        self._queue.put(pending)
        return await asyncio.wrap_future(pending.future)

    def close(self, *, cancel: bool = False) -> None:
        """Stop the worker thread after the batches already queued, or with ``cancel`` as soon as possible."""
        with self._lock:
            if cancel:
                self.cancelled.set()
                self._fail_queued()
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
                self._thread = None

    def _fail_queued(self) -> None:
        while True:
            try:
                pending = self._queue.get_nowait()
            except queue.Empty:
                return
            if pending is not None and pending.future.set_running_or_notify_cancel():
                pending.future.set_exception(LLMError("the backend was stopped"))

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        carry: _Pending[R, T] | None = None
        while True:
            first = carry if carry is not None else self._queue.get()
            carry = None
            if first is None:
                return
            batch, carry, stop = self._collect(first)
            live = [p for p in batch if p.future.set_running_or_notify_cancel()]
            if live and self.cancelled.is_set():
                for pending in live:
                    pending.future.set_exception(LLMError("the backend was stopped"))
            elif live:
                self._serve(live)
            if stop:
                return

    def _collect(self, first: _Pending[R, T]) -> tuple[list[_Pending[R, T]], _Pending[R, T] | None, bool]:
        """The batch starting at ``first``, the item that did not fit (if any), and whether close() was asked."""
        batch, size = [first], self._weight(first.item)
        deadline = time.monotonic() + self.window_s
        while size < self.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                nxt = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                return batch, None, True
            if size + self._weight(nxt.item) > self.max_batch_size:
                return batch, nxt, False
            batch.append(nxt)
            size += self._weight(nxt.item)
        return batch, None, False

    def _serve(self, batch: list[_Pending[R, T]]) -> None:
        self.batches += 1
        self.batch_sizes.append(sum(self._weight(p.item) for p in batch))
        try:
            results = self._run([p.item for p in batch])
            if len(results) != len(batch):
                raise LLMError(f"batch function returned {len(results)} results for {len(batch)} requests")
        except Exception as exc:  # a failed batch fails its requests, never the worker
            log.exception("batch of %d requests failed", len(batch))
            error = exc if isinstance(exc, LLMError) else LLMError(f"batch failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc if error is not exc else None
            results = [error] * len(batch)
        for pending, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)
