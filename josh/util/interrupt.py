"""SIGTERM (what schedulers and ``kill`` send) handled like Ctrl-C inside the async runners.

Under ``asyncio.run`` Ctrl-C cancels the main task, so the runner's ``finally`` blocks write what they have
(``stats.json``, ``summary.json``) before the command stops. ``terminate_like_interrupt`` does the same for
SIGTERM: it cancels the running task, and the cancellation leaves the block as ``KeyboardInterrupt``, which the
command line reports as it reports Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """While the block runs in the main thread's event loop, SIGTERM cancels the current task; the cancellation
    then leaves the block as ``KeyboardInterrupt``. Elsewhere (another thread, no signal support) it does nothing."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[bool] = []

    def on_terminate() -> None:
        received.append(True)
        if task is not None:
            task.cancel()

    previous = signal.getsignal(signal.SIGTERM)
    try:
        loop.add_signal_handler(signal.SIGTERM, on_terminate)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals on this system
        installed = False
    if not installed:
        yield
        return
    try:
        yield
    except asyncio.CancelledError:
        if received:
            raise KeyboardInterrupt("terminated (SIGTERM)") from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
