"""The ``josh serve`` server of SmolLM2 that ``test_serve_real.py`` and ``test_judge_serve_real.py`` share: one
process start (model load) per worker instead of one per module when xdist runs both on one worker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from josh.cli.serve import ModelServer, served_folder

PROXIES = ("http_proxy", "https_proxy", "all_proxy")
# ``transformers serve`` with continuous batching keeps its KV blocks across requests and reuses a shared prefix:
# every request here starts with the same ~1,200-token tool listing, which sequential generation prefilled anew each
# time (4.3 s a request on one core, 0.7-0.8 s with the prefix reused; the replies token for token the same). Its
# sampling settings are the first request's, so a server started with it serves greedy requests only, as here. 256
# blocks of 32 tokens hold two conversations of 4,096 tokens; the default sizes the cache from free memory and spent
# 25 s allocating it on the first request.
SERVER_OPTIONS = ["--device", "cpu", "--continuous-batching", "--cb-num-blocks", "256", "--cb-block-size", "32"]


@contextmanager
def loopback_env() -> Iterator[None]:
    """No proxy for loopback requests, and a server that writes each access log line at once
    (``tests/served_outage.py`` counts the requests it answered)."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.lower() in PROXIES}
    unbuffered = os.environ.get("PYTHONUNBUFFERED")
    os.environ["PYTHONUNBUFFERED"] = "1"
    try:
        yield
    finally:
        if unbuffered is None:
            os.environ.pop("PYTHONUNBUFFERED", None)
        else:
            os.environ["PYTHONUNBUFFERED"] = unbuffered
        os.environ.update(saved)


@pytest.fixture(scope="session")
def smollm2_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """``transformers serve`` of SmolLM2 on a loopback port, stopped at the end of the session."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    log = tmp_path_factory.mktemp("smol") / "server.log"
    with loopback_env():
        server = ModelServer(served_folder("smollm2"), options=SERVER_OPTIONS, log=log).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def smollm2_server(smollm2_process: ModelServer) -> ModelServer:
    """The shared server, started again if an earlier module left it killed (the outage test kills it)."""
    if smollm2_process.process is None or smollm2_process.process.poll() is not None:
        with loopback_env():
            smollm2_process.stop()
            smollm2_process.start(timeout_s=1200)
    return smollm2_process
