"""Server sessions of an OpenEnv environment, pooled, each at a known point of one episode.

An OpenEnv server cannot fork an episode, so a branch of josh's search is rebuilt: the session whose actions are
the longest prefix of the branch's own goes on from there, and any other is reset to the branch's task and
replays its actions first (``replayed`` counts those steps: a branch forked at depth d costs up to d extra steps
on the server, a linear evaluation none). A replayed step must answer as it did the first time (the same
observation), else the server is not deterministic and the branch cannot be rebuilt: ``RuntimeError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Action = dict[str, Any]
Step = dict[str, Any]
"""One answered step: the observation, with ``reward`` and ``done`` put in."""


@dataclass
class Session:
    """One WebSocket session (OpenEnv's client) and where its episode is: the task and the actions taken."""

    client: Any
    task_id: str | None = None
    actions: list[Action] = field(default_factory=list)
    used: int = 0


class Sessions:
    """At most ``size`` sessions with the server at ``url``; see the module docstring."""

    def __init__(self, url: str, size: int = 8) -> None:
        self.url, self.size = url, size
        self.pool: list[Session] = []
        self.replayed = 0
        self.clock = 0

    def opening(self, task_id: str) -> Step:
        """A fresh episode of task ``task_id``: the reset's answer (the user's opening)."""
        session = self._at(task_id, None)
        session.task_id, session.actions = task_id, []
        return _answer(session.client.reset(task_id=task_id))

    def step(self, task_id: str, done: list[Action], answers: list[Step], action: Action) -> Step:
        """The answer to ``action`` after the actions ``done`` (``answers``: what each answered the first time) on
        task ``task_id``; a session elsewhere is reset and replays ``done`` first."""
        session = self._at(task_id, done)
        if session.task_id != task_id or not _prefix(session.actions, done):
            session.client.reset(task_id=task_id)
            session.task_id, session.actions = task_id, []
        for replayed in done[len(session.actions) :]:
            got = _answer(session.client.step(replayed))
            self.replayed += 1
            want = answers[len(session.actions)]
            session.actions.append(replayed)
            if got != want:
                raise RuntimeError(
                    f"the OpenEnv server at {self.url} answered a replayed step differently ({got.get('content')!r} "
                    f"instead of {want.get('content')!r}): its episodes are not deterministic, so branches cannot "
                    "be rebuilt"
                )
        answer = _answer(session.client.step(action))
        session.actions.append(action)
        return answer

    def _at(self, task_id: str, done: list[Action] | None) -> Session:
        """The session to use: the one whose actions are the longest prefix of ``done`` on this task, else a new
        one, else the least recently used (``done`` None: never one that fits)."""
        self.clock += 1
        fits = [s for s in self.pool if done is not None and s.task_id == task_id and _prefix(s.actions, done)]
        if fits:
            best = max(fits, key=lambda s: len(s.actions))
        elif len(self.pool) < self.size:
            best = Session(self._connect())
            self.pool.append(best)
        else:
            best = min(self.pool, key=lambda s: s.used)
        best.used = self.clock
        return best

    def _connect(self) -> Any:
        from openenv.core.generic_client import GenericEnvClient  # deferred: the josh-agents[openenv] extra

        client = GenericEnvClient(base_url=self.url).sync()
        client.connect()
        return client

    def close(self) -> None:
        for session in self.pool:
            session.client.close()
        self.pool.clear()


def _prefix(short: list[Action], long: list[Action]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def _answer(result: Any) -> Step:
    return {**dict(result.observation), "reward": result.reward, "done": bool(result.done)}
