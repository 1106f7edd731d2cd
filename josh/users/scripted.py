"""Scripted replay user: says a fixed list of utterances in order, whatever the agent replies, then ends."""

from __future__ import annotations

from collections.abc import Sequence

from josh.core.user import UserTurn
from josh.types import Message, Task
from josh.users import register_user


class ScriptedUser:
    """Replays ``utterances``, or, when none are given, the user turns of the task's original transcript.

    Stateless: the next utterance is picked by counting the user turns already in the transcript. After the
    script it ends the conversation with ``goodbye`` (an empty ``goodbye`` ends it silently).
    """

    def __init__(
        self, llm: object = None, *, utterances: Sequence[str] | None = None, goodbye: str = "Thanks, goodbye!"
    ) -> None:
        bad = isinstance(utterances, str) or not all(isinstance(u, str) for u in utterances or ())
        if bad:
            raise ValueError("utterances must be a list of strings")
        self.utterances = list(utterances) if utterances is not None else None
        self.goodbye = goodbye

    def script(self, task: Task) -> list[str]:
        """The utterances this user says for ``task``."""
        if self.utterances is not None:
            return self.utterances
        lines = [m.content for m in task.transcript if m.role == "user" and m.content]
        if not lines:
            raise ValueError(f"task {task.id!r} has no user turns in its transcript; pass utterances= to replay")
        return lines

    def respond(self, task: Task, transcript: Sequence[Message]) -> UserTurn:
        """The next scripted utterance (synchronous form of ``reply``)."""
        lines = self.script(task)
        said = sum(1 for m in transcript if m.role == "user")
        if said < len(lines):
            return UserTurn(text=lines[said])
        return UserTurn(text=self.goodbye, done=True)

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        return self.respond(task, transcript)


register_user("scripted", ScriptedUser, summary="replays utterances (default: the task's original user turns)")
