"""Server sessions of an OpenEnv environment, pooled, each at a known point of one episode.

An OpenEnv server cannot fork an episode, so a branch of josh's search is rebuilt: the session whose actions are
the longest prefix of the branch's own goes on from there, and any other is reset to the branch's task and
replays its actions first (``replayed`` counts those steps: a branch forked at depth d costs up to d extra steps
on the server, a linear evaluation none). A replayed step must answer as it did the first time (the same
observation), else the server is not deterministic and the branch cannot be rebuilt: ``RuntimeError``.

The pool is thread-safe: conversations run their server calls on worker threads (``remote.py``), each holding one
session for one call; a call finding every session busy waits for one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

Action = dict[str, Any]
Step = dict[str, Any]
"""One answered step: the observation, with ``reward`` and ``done`` put in."""


@dataclass
class ServerSession:
    """One WebSocket session (OpenEnv's client) and where its episode is: the task and the actions taken."""

    client: Any
    task_id: str | None = None
    actions: list[Action] = field(default_factory=list)
    used: int = 0
    busy: bool = False


class SessionPool:
    """At most ``size`` sessions with the server at ``url``; ``resets(task_id)``: the reset arguments that start the
    task's episode. See the module docstring."""

    def __init__(self, url: str, resets: Callable[[str], dict[str, Any]], size: int = 8) -> None:
        self.url, self.resets, self.size = url, resets, size
        self.pool: list[ServerSession] = []
        self.replayed = 0
        self.clock = 0
        self.free = threading.Condition()

    def opening(self, task_id: str) -> Step:
        """A fresh episode of task ``task_id``: the reset's answer (the user's opening)."""
        with self._held(task_id, None) as session:
            session.task_id, session.actions = task_id, []
            return _answer(session.client.reset(**self.resets(task_id)))

    def step(self, task_id: str, done: list[Action], answers: list[Step], action: Action) -> Step:
        """The answer to ``action`` after the actions ``done`` (``answers``: what each answered the first time) on
        task ``task_id``; a session elsewhere is reset and replays ``done`` first."""
        with self._held(task_id, done) as session:
            if session.task_id != task_id or not _prefix(session.actions, done):
                session.task_id, session.actions = None, []
                session.client.reset(**self.resets(task_id))
                session.task_id = task_id
            for replayed in done[len(session.actions) :]:
                got = _answer(session.client.step(replayed))
                with self.free:
                    self.replayed += 1
                want = answers[len(session.actions)]
                session.actions.append(replayed)
                if got != want:
                    raise RuntimeError(
                        f"the OpenEnv server at {self.url} answered a replayed step differently "
                        f"({got.get('content', got.get('result'))!r} instead of "
                        f"{want.get('content', want.get('result'))!r}): its episodes are not deterministic, so "
                        "branches cannot be rebuilt"
                    )
            session.actions.append(action)  # before the step: a step that raises leaves the session unknown
            try:
                return _answer(session.client.step(action))
            except BaseException:
                session.task_id, session.actions = None, []
                raise

    @contextmanager
    def _held(self, task_id: str, done: list[Action] | None) -> Iterator[ServerSession]:
        """A session to use, held by this call alone: the free one whose actions are the longest prefix of ``done``
        on this task, else a new one, else the least recently used free one (``done`` None: never one that fits);
        every session busy: wait for one."""
        with self.free:
            while True:
                idle = [s for s in self.pool if not s.busy]
                fits = [s for s in idle if done is not None and s.task_id == task_id and _prefix(s.actions, done)]
                if fits or len(self.pool) >= self.size and idle:
                    best = max(fits, key=lambda s: len(s.actions)) if fits else min(idle, key=lambda s: s.used)
                    break
                if len(self.pool) < self.size:
                    best = ServerSession(None)
                    self.pool.append(best)
                    break
                self.free.wait()
            self.clock += 1
            best.used, best.busy = self.clock, True
        try:
            if best.client is None:
                best.client = self._connect()
            yield best
        finally:
            with self.free:
                best.busy = False
                self.free.notify()

    def _connect(self) -> Any:
        from openenv.core.generic_client import GenericEnvClient  # optional: the openenv extra

        client = GenericEnvClient(base_url=self.url).sync()
        client.connect()
        return client

    def close(self) -> None:
        with self.free:
            for session in self.pool:
                if session.client is not None:
                    session.client.close()
            self.pool.clear()


def _prefix(short: list[Action], long: list[Action]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def _answer(result: Any) -> Step:
    return {**dict(result.observation), "reward": result.reward, "done": bool(result.done)}
