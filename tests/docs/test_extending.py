"""The "Extending josh" page (``docs/extending.md``, once a README section): its worked examples (an agent protocol, an
environment, a user simulator) read from the page as written, each made the module it says it is, registered the way
it says, and run by `josh eval`."""

from __future__ import annotations
import __future__

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import josh.agents
import josh.envs
from josh.agents import agent_prompt
from josh.cli.main import app
from josh.envs import build_env
from josh.types import Message, assistant, user

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
REPLIES = ['<call>{"name": "find_book", "arguments": {"title": "Dune"}}</call>', "<say>Dune is on shelf B2.</say>"]


def page_files() -> dict[str, list[str]]:
    """The page's code blocks by the file their first line names (a file may have several blocks)."""
    text = PAGE.read_text(encoding="utf-8")
    files: dict[str, list[str]] = {}
    for path, code in re.findall(r"```python\n# (\S+)\n(.*?)```", text, re.S):
        files.setdefault(path, []).append(code)
    return files


def run_as(path: str, code: str, namespace: dict) -> None:
    compiled = compile(code, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(compiled, namespace)


@pytest.fixture
def extended(registries: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's new modules under their own names and its registrations, all undone after the test."""
    files = page_files()
    for path in ("josh/agents/tagged.py", "josh/envs/library/__init__.py", "josh/users/echo.py"):
        name = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        [code] = files[path]
        run_as(path, code, module.__dict__)
    for path, package in (("josh/agents/__init__.py", josh.agents), ("josh/envs/__init__.py", josh.envs)):
        [code] = files[path]
        run_as(path, code, dict(vars(package)))


def test_the_readme_protocol_environment_and_user_run_from_the_cli(extended: None, tmp_path: Path) -> None:
    args = ["eval", "--env", "library", "--agent", "tagged", "--user", "echo", "--backend", "scripted"]
    args += ["--llm-option", f"replies={json.dumps(REPLIES)}", "--user-option", "turns=1", "--no-progress"]
    ran = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert ran.exit_code == 0, ran.output
    [result] = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert result["task_id"] == "test-0" and result["reward"] == 1.0
    said = [m["content"] for m in result["messages"] if m["role"] == "assistant"]
    assert said == [REPLIES[0], REPLIES[1]]
    assert [m["content"] for m in result["messages"] if m["role"] == "user"][1] == 'RESULT {"shelf": "B2"}'
    assert [call["verdict"] for call in result["diagnosis"]["calls"]] == ["correct"]
    turn = [Message(**m) for m in result["messages"][1:4]]
    steps = josh.agents.protocol_named("tagged").steps(turn, "Dune is on shelf B2.")
    assert [(s.kind, s.name) for s in steps] == [("call", "find_book"), ("speak", "")]
    assert json.loads(steps[0].result or "") == {"shelf": "B2"}


def test_the_readme_protocol_writes_the_prompt_and_the_warm_start_rows(extended: None) -> None:
    env = build_env("library", "")
    prompt = agent_prompt("tagged", env, examples=1)
    task = env.tasks("train")[0]
    assert "Act with <call>{json}</call>" in prompt.system_prompt(task) and "find_book" in prompt.system_prompt(task)
    assert prompt.render([user("hi"), assistant("Hello.")])[-1].content == "<say>Hello.</say>"


def test_the_readme_user_checks_its_options_on_the_command_line(extended: None, tmp_path: Path) -> None:
    args = ["eval", "--agent", "oracle", "--user", "echo", "--limit", "2", "--no-progress"]
    ran = CliRunner().invoke(app, [*args, "--user-option", "turns=3", "--out", str(tmp_path / "a")])
    assert ran.exit_code == 0, ran.output
    refused = CliRunner().invoke(app, [*args, "--user-option", "turn=3", "--out", str(tmp_path / "b")])
    assert refused.exit_code == 2 and "unknown option turn for the echo user" in refused.output
    assert "valid: turns" in refused.output


def test_a_new_environment_is_refused_by_agents_bound_to_another(extended: None, tmp_path: Path) -> None:
    refused = CliRunner().invoke(app, ["eval", "--env", "library", "--agent", "oracle", "--out", str(tmp_path)])
    assert refused.exit_code == 2 and "the oracle agent runs on toolwoz only, not on environment 'library'" in (
        refused.output
    )


def test_a_new_environment_with_tasks_of_its_own_refuses_a_data_source(extended: None, tmp_path: Path) -> None:
    args = ["eval", "--env", "library", "--agent", "tagged", "--user", "echo", "--backend", "scripted", "--plan"]
    refused = CliRunner().invoke(app, [*args, "--data", "toolwoz", "--out", str(tmp_path)])
    assert refused.exit_code == 2
    assert "--env library has one shelf of its own and takes no --data; drop --data toolwoz" in refused.output


@pytest.fixture
def arms_restored() -> Iterator[None]:
    """The registered arms as they were, after a test that registers one."""
    import josh.loop.arms

    saved = list(josh.loop.arms.ARMS)
    yield
    josh.loop.arms.ARMS[:] = saved


def test_the_docs_arm_trains_on_the_rounds_own_rows_in_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arms_restored: None
) -> None:
    import josh.loop.arms
    from josh.loop.runner import Loop
    from tests.fakes.loop import RecordingTrainer, builder, merger
    from tests.loop.plumbing import recipe  # a small held-out evaluation: the test reads rows, not scores

    [code] = page_files()["josh/loop/arms/sft_last.py"]
    module = types.ModuleType("josh.loop.arms.sft_last")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    run_as("josh/loop/arms/sft_last.py", code, module.__dict__)

    trainer = RecordingTrainer()
    arm = {"model": {"name": "base"}, "max_length": 512}
    result = Loop(recipe(tmp_path, arms={"sft_last": arm}), trainer=trainer, builder=builder, merger=merger,
                  progress=False).run()  # fmt: skip
    assert "round 1 JOSH-SFT-last" in [e.label for e in result.evaluated]
    round1 = tmp_path / "scripted" / "round-1"
    last, sft = trainer.recipes[str(round1 / "train-sft-last")], trainer.recipes[str(round1 / "train-sft")]
    own = (round1 / "extract" / "sft.jsonl").read_text().splitlines()
    assert Path(last.data).read_text().splitlines() == own  # the round's own rows only
    assert len(Path(sft.data).read_text().splitlines()) > len(own)  # JOSH-SFT: the warm start's rows too
    assert ("round 1 JOSH-SFT-last", "warm start") in [(p.model, p.baseline) for p in result.pairs]

    with pytest.raises(ValueError, match="no registered arm 'sft_lst'"):
        Loop(recipe(tmp_path, arms={"sft_lst": arm}), trainer=trainer, builder=builder, merger=merger)
    with pytest.raises(ValueError, match="already registered"):
        josh.loop.arms.register_arm(module.LastRoundSFT())
