"""josh.envs.checker: every built-in environment passes; a shared per-branch field, a raising call and an
out-of-range reward are each caught with a message naming the problem; the fork contract refuses undeclared fields."""

from __future__ import annotations

import json

import pytest

from josh.core.env import ConversationState, EnvBase
from josh.envs import build_env
from josh.envs.checker import EnvCheckError, check_env
from josh.types import CallRecord, ErrorCategory, Task, ToolCall, ToolResult

NOTE = {
    "type": "function",
    "function": {
        "name": "note",
        "description": "Write a note down.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


class NoteState(ConversationState):
    __slots__ = ("notes",)
    branch_fields = (*ConversationState.branch_fields, "notes")

    def __init__(self, task: Task) -> None:
        super().__init__(task)
        self.notes: list[str] = []


class SharedNoteState(NoteState):
    """The bug the checker is for: a per-branch list declared shared, so every branch appends to one list."""

    __slots__ = ()
    shared_fields = (*ConversationState.shared_fields, "notes")
    branch_fields = ConversationState.branch_fields


class NoteEnv(EnvBase):
    """Notes on a pad; the reward is a tenth per note (at most 1)."""

    name = "notes"
    tools = [NOTE]
    splits = ("test",)
    state_type: type[NoteState] = NoteState

    def system_prompt(self, task: Task) -> str:
        return "Take notes."

    def tasks(self, split: str) -> list[Task]:
        return [] if split != "test" else [Task(id=f"notes-{i}", env=self.name, details={"actions": [{"name": "note", "kwargs": {"text": "a"}}]})
                for i in range(2)]  # fmt: skip

    def reset(self, task: Task) -> NoteState:
        return self.state_type(task)

    def call(self, state: NoteState, call: ToolCall) -> ToolResult:
        text = call.arguments.get("text") if isinstance(call.arguments, dict) else None
        if call.name != "note" or not isinstance(text, str):
            result = ToolResult("Error: note(text: str) only", ErrorCategory.INVALID_VALUE)
        else:
            state.notes.append(text)
            result = ToolResult(json.dumps({"notes": len(state.notes)}))
        state.log.append(CallRecord(call.name, call.arguments, result.content, error=result.error))
        return result

    def reward(self, state: NoteState, messages: list) -> float:
        return min(1.0, len(state.notes) / 10)


class SharedNotes(NoteEnv):
    state_type = SharedNoteState


class RaisingNotes(NoteEnv):
    def call(self, state: NoteState, call: ToolCall) -> ToolResult:
        if isinstance(call.arguments, dict) and call.arguments.get("text") == "":
            raise IndexError("empty note")
        return super().call(state, call)


class UnboundedNotes(NoteEnv):
    def reward(self, state: NoteState, messages: list) -> float:
        return float(len(state.notes))


def test_a_sound_environment_passes_every_check() -> None:
    report = check_env(NoteEnv())
    assert report.passed and [c.name for c in report.checks][:3] == ["contract", "splits load", "tool schemas"]
    assert "branches of 2 tasks equal their replays" in next(
        c.detail for c in report.checks if c.name == "fork isolation"
    )


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            SharedNotes(),
            r"fork isolation: a branch of task 'notes-\d' differs from a fresh replay .*shares per-branch state \(SharedNoteState",
        ),
        (RaisingNotes(), r"hostile calls: call raised IndexError: empty note on note\(\{'text': ''\}\)"),
        (UnboundedNotes(), r"rewards in \[0, 1\]: reward \d+\.0 on task 'notes-0' is not a number in \[0, 1\]"),
    ],
)
def test_the_checker_names_the_problem(env: NoteEnv, problem: str) -> None:
    with pytest.raises(EnvCheckError, match=problem):
        check_env(env)


def test_a_missing_member_or_split_fails_by_name() -> None:
    class Bare:
        name, tools = "bare", [NOTE]

    report = check_env(Bare(), raise_on_failure=False)  # type: ignore[arg-type]
    assert not report.passed and "lacks system_prompt, reset, call, reward, tasks, splits" in report.failures()
    report = check_env(NoteEnv(), splits=("train",), raise_on_failure=False)
    assert "splits load: split 'train' has no tasks" in report.failures()


def test_the_fork_contract_refuses_an_undeclared_field() -> None:
    with pytest.raises(TypeError, match="Sloppy adds answer without declaring it per-branch"):

        class Sloppy(ConversationState):
            __slots__ = ("answer",)

    with pytest.raises(TypeError, match="Dicty must declare __slots__"):

        class Dicty(ConversationState):
            pass

    state = NoteState(Task(id="t", env="notes"))
    state.notes.append("a")
    child = state.fork()
    child.notes.append("b")
    assert state.notes == ["a"] and child.notes == ["a", "b"] and child.task is state.task


def test_builtin_environments_pass(mini_env, shared_data) -> None:
    assert check_env(mini_env).passed
    for name in ("retail", "airline"):
        assert check_env(build_env(name, str(shared_data / "taubench" / name))).passed
