"""``tau2_scripted``: a deterministic τ²-bench customer (tau2-* envs) for tests and gold runs. It talks like
``retail_scripted`` (opens with the task's request, confirms questions, stops once the agent reports back) and, on
telecom, acts on its own phone: after the agent's first reply it makes the task's user-side gold calls
(``details["user_actions"]``) through the user tools, in one turn, before saying it did. It lives with
``retail_scripted``, whose talk it shares (importing it does not import ``tau2``)."""

from __future__ import annotations

from josh.core.user import UserTurn
from josh.envs.taubench.user import TauScriptedUser, scripted_entry
from josh.types import Message, Task, ToolCall

ENVS = ("tau2-airline", "tau2-retail", "tau2-telecom")
DID = "Done, I did that on my phone."


def user_calls(task: Task) -> list[ToolCall]:
    """The task's user-side gold calls, with ids the trajectory can tell apart."""
    return [
        ToolCall(name=str(a["name"]), arguments=dict(a.get("kwargs") or {}), id=f"user_{i}")
        for i, a in enumerate(task.details.get("user_actions") or [])
    ]


class Tau2ScriptedUser(TauScriptedUser):
    """Stateless: what it has done is read from the transcript (its own calls are ``user`` messages there).

    * no agent reply yet: the opening line;
    * user-side gold calls not made yet: all of them, saying ``did``;
    * otherwise as ``retail_scripted``: ``confirm`` a question, else ``###STOP###`` (also after ``max_turns``).
    """

    def __init__(self, *, max_turns: int = 10, confirm: str = "yes", did: str = DID) -> None:
        super().__init__(max_turns=max_turns, confirm=confirm)
        self.did = did

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        made = sum(len(m.tool_calls or ()) for m in transcript if m.role == "user")
        calls = user_calls(task)[made:]
        if calls and any(m.role == "assistant" for m in transcript):
            return UserTurn(text=self.did, tool_calls=calls)
        return await super().reply(task, transcript)


TAU2_SCRIPTED = scripted_entry(
    "tau2_scripted",
    Tau2ScriptedUser,
    "τ²: retail_scripted's talk, and the task's user-side gold calls on the user's device (telecom)",
    envs=ENVS,
)
"""The ``tau2_scripted`` user, which ``josh.users.USERS`` names (``josh.envs.taubench.tau2_user:TAU2_SCRIPTED``)."""
