"""A real model server killed under ``josh eval`` and ``josh rollout`` at once, then restarted (issue 48): the
scenario ``tests/cli/test_serve_real.py`` (``josh serve``) and ``tests/llm/test_vllm_serve.py`` (``vllm
serve``) share.

Both commands run as child processes against one server: the evaluation one conversation at a time, the rollout
one tree. The server is killed (SIGKILL, its child processes too, as a node that dies) once the evaluation has
written its first conversation while the rollout's tree is still being searched (see ``kill_mid_runs``); both runs must then stop non-zero
(the seconds it took are printed), and every record they wrote after the kill is failed. The server restarted on the same port, the
same two commands rerun to completion, and their latest records are what an uninterrupted run wrote."""

from __future__ import annotations

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import ModelServer
from tests.fakes.process import start_josh


@dataclass
class Stopped:
    """A run the kill stopped: its exit code, output, seconds from the kill to its exit, and the records it had
    written when the server was killed."""

    code: int
    output: str
    stopped_s: float
    written_before: int


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def latest(path: Path) -> dict[tuple, dict]:
    """The records of a results or trees file by (task, trial): a later line supersedes an earlier one."""
    return {(r["task_id"], r.get("trial", 0)): r for r in records(path)}


def kill(server: ModelServer) -> float:
    """SIGKILL the server and every process it started; the monotonic time of the kill."""
    assert server.process is not None and server.process.poll() is None, "the server is not running"
    parent = psutil.Process(server.process.pid)
    family = [*parent.children(recursive=True), parent]
    for process in family:
        process.kill()
    killed = time.monotonic()
    psutil.wait_procs(family, timeout=30)
    return killed


def restart(server: ModelServer, timeout_s: float = 1200.0) -> None:
    """Start the killed server again, on the same port: the reruns are the same commands."""
    server.stop()
    server.start(timeout_s=timeout_s)


def answered(server: ModelServer) -> int:
    """Chat requests the server has answered so far, from its access log (a server started with
    ``PYTHONUNBUFFERED=1`` writes each line at once)."""
    assert server.log_path is not None, "the server needs a log"
    return server.log_path.read_text(errors="replace").count('"POST /v1/chat/completions HTTP/1.1" 200')


def kill_mid_runs(server: ModelServer, evaluation: list[str], rollout: list[str], timeout_s: float = 900) -> dict:
    """Kill the server mid-``evaluation`` and mid-``rollout``, and wait for both to stop: ``{"eval": Stopped,
    "rollout": Stopped}``. The evaluation runs until it has written a conversation and is then frozen (SIGSTOP); the
    rollout starts, and once the server has answered two of its requests, its tree unfinished, the server is
    killed and the evaluation let go on (SIGCONT). Freezing makes the order certain whatever the load."""
    results, trees = Path(out_of(evaluation)) / "results.jsonl", Path(out_of(rollout)) / "trees.jsonl"
    children = {"eval": start_josh(evaluation)}
    deadline = time.monotonic() + timeout_s
    try:
        wait_for(lambda: records(results), children, deadline, "a conversation written")
        children["eval"].send_signal(signal.SIGSTOP)
        written = {"eval": len(records(results))}
        before = answered(server)
        children["rollout"] = start_josh(rollout)
        # the frozen evaluation (one conversation at a time) may have one request in flight, answered all the same
        wait_for(lambda: answered(server) >= before + 3, children, deadline, "two requests of the rollout answered")
        written["rollout"] = len(records(trees))
        assert written["rollout"] == 0, "the rollout's tree was finished before the kill: not a kill mid-search"
        killed = kill(server)
        children["eval"].send_signal(signal.SIGCONT)
        with ThreadPoolExecutor(len(children)) as pool:
            ended = dict(zip(children, pool.map(finish, children.values()), strict=True))
    finally:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGCONT)
                child.kill()
                child.wait()
    return {
        name: Stopped(children[name].returncode, output, at - killed, written[name])
        for name, (output, at) in ended.items()
    }


def wait_for(condition, children: dict, deadline: float, what: str) -> None:
    while not condition():
        for name, child in children.items():
            assert child.poll() is None, f"{name} ended before the kill: {child.communicate()[0]}"
        assert time.monotonic() < deadline, f"not within the time allowed: {what}"
        time.sleep(0.1)


def finish(child) -> tuple[str, float]:
    output, _ = child.communicate(timeout=300)
    return output, time.monotonic()


def out_of(args: list[str]) -> str:
    return args[args.index("--out") + 1]


def rerun(args: list[str]) -> None:
    """The same command again, in this process, to its end."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def check_stopped(stopped: Stopped, base_url: str, path: Path, tasks: int) -> None:
    """The run exited non-zero in one line naming the server (how long it took is printed, not asserted: a test
    does not time the machine); what it wrote after the kill is failed, and it left some of its ``tasks`` to redo."""
    assert stopped.code not in (0, None), stopped.output
    assert f"{base_url} is down" in stopped.output and "Traceback" not in stopped.output, stopped.output
    written = records(path)
    assert all(row["failed"] for row in written[stopped.written_before :]), written[stopped.written_before :]
    assert sum(not row["failed"] for row in latest(path).values()) < tasks
