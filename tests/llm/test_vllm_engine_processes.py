"""Which processes ``AsyncEngine.shutdown`` waits for: those its engine's start created, without the helpers that live
as long as this process (real processes standing in for vLLM's engine core, its worker and multiprocessing's resource
tracker)."""

import multiprocessing
import subprocess
import sys

import psutil

from josh.llm.vllm_engine import _descendants, _engine_processes

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def engine_core(pids) -> None:
    """An engine core: starts a worker of its own, reports its pid, then runs until terminated."""
    worker = subprocess.Popen(SLEEP)
    pids.send(worker.pid)
    worker.wait()


def test_the_engine_processes_are_its_core_and_workers_not_a_helper_its_start_launched() -> None:
    earlier = {p.pid for p in _descendants()}
    helper = subprocess.Popen(SLEEP)  # like the resource tracker: a child of this process, not a multiprocessing one
    receive, send = multiprocessing.Pipe(duplex=False)
    core = multiprocessing.get_context("fork").Process(target=engine_core, args=(send,), daemon=True)
    core.start()
    try:
        worker = receive.recv()
        assert helper.pid in {p.pid for p in _descendants()}
        assert {p.pid for p in _engine_processes(earlier)} == {core.pid, worker}
        assert _engine_processes(earlier | {core.pid}) == []
    finally:
        for process in psutil.Process().children(recursive=True):
            if process.pid not in earlier:
                process.kill()
        helper.wait()
        core.join()
