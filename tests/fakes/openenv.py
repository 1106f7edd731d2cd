"""``served_env``: ``josh env serve`` of this checkout as a child process on a free port, stopped on exit;
``served_app``: an OpenEnv app on a thread of the test process."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests

from josh.cli.serve import free_port
from tests.fakes.process import start_josh


@contextlib.contextmanager
def served_env(name: str, *args: str, timeout: float = 120.0) -> Iterator[str]:
    """Serve environment ``name`` (extra ``josh env serve`` arguments ``args``); yields its URL once /health answers."""
    port = free_port()
    proc = start_josh(["env", "serve", name, "--port", str(port), *args])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"josh env serve {name} exited: {proc.stdout.read() if proc.stdout else ''}")
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"{url}/health", timeout=2).ok:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"josh env serve {name} did not answer in {timeout:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        _stop(proc, port)


def _stop(proc: subprocess.Popen, port: int) -> None:
    """Ctrl-C, as a user stops the server; once it has stopped listening (or after 10 s), the process is killed:
    what is left is Python unloading some 2,700 modules (2-3 s on a busy 2-core machine), which no test reads."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                break
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@contextlib.contextmanager
def served_app(app: Any) -> Iterator[str]:
    """Serve an OpenEnv ``app`` with uvicorn on a thread of this process (no child process to start); yields its URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="openenv-test-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OpenEnv app did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
