"""The loop's tree and GRPO arms on the scripted loop: what each trains on and from where, the same held-out
evaluation, and the LLM calls and tokens behind every model in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from josh.loop.report import load_loop_report
from josh.loop.runner import Loop
from josh.loop.stages.manifest import input_digest, read_manifest
from josh.run.components import ComponentOptions, Components
from tests.fakes.loop import RecordingTrainer, builder, hopeless, lines
from tests.loop.plumbing import recipe  # a small held-out evaluation: no test here reads a score

ARM = {"model": {"name": "base"}, "max_length": 512}
GRPO_CALLS = 40  # LLM calls the stub GRPO trainer reports for its rollouts, per round


class Counted:
    """The scripted oracle, reporting one LLM call and 100 + 10 tokens per turn like a prompted agent would."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def __getattr__(self, name: str) -> Any:  # everything else (its prompt frame, protocol) is the oracle's
        return getattr(self.agent, name)

    async def turn(self, history: list[Any], state: Any, *, n: int = 1) -> list[Any]:
        turns = await self.agent.turn(history, state, n=n)
        return [t.model_copy(update={"llm_calls": 1, "prompt_tokens": 100, "completion_tokens": 10}) for t in turns]


def counted(options: ComponentOptions) -> Components:
    built = builder(options)
    built.agent = Counted(built.agent)
    return built


class OnlineTrainer(RecordingTrainer):
    """Also leaves what a GRPO run reports about its rollouts."""

    def __call__(self, recipe: Any, resume: bool) -> Path:
        run = super().__call__(recipe, resume)
        if recipe.method == "grpo":
            metrics = json.loads((run / "metrics.json").read_text())
            metrics["rollouts"] = {"llm_calls": GRPO_CALLS, "prompt_tokens": 5000, "completion_tokens": 700}
            (run / "metrics.json").write_text(json.dumps(metrics))
        return run


def online(tmp_path: Path, **changes: Any):
    grpo = {**ARM, "method": "grpo", "grpo": {"num_generations": 2, "env": "airline", "agent": "react"}}
    return recipe(tmp_path, tree={**ARM, "method": "tree"}, grpo=grpo, **changes)


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, OnlineTrainer, Any]:
    """Two rounds with every arm at the default GRPO budget, read by the module's tests (none changes it)."""
    tmp_path = tmp_path_factory.mktemp("online")
    trainer = OnlineTrainer()
    result = Loop(online(tmp_path, rounds=2), trainer=trainer, builder=counted, progress=False).run()
    return tmp_path, trainer, result


def test_tree_and_grpo_arms_beside_sft_and_kto_with_their_costs(two_rounds: tuple[Path, OnlineTrainer, Any]) -> None:
    tmp_path, trainer, result = two_rounds
    run_dir, round1, round2 = (
        tmp_path / "scripted",
        tmp_path / "scripted" / "round-1",
        tmp_path / "scripted" / "round-2",
    )
    labels = [e.label for e in result.evaluated]
    for r in (1, 2):
        assert [label for label in labels if label.startswith(f"round {r}")] == [
            f"round {r} {arm}" for arm in ("JOSH-SFT", "JOSH-KTO", "JOSH-tree", "GRPO")
        ]
    warm = run_dir / "round-0" / "warmstart" / "train"
    tree1 = trainer.recipes[str(round1 / "train-tree")]
    assert tree1.method == "tree" and tree1.model.adapter == str(warm)  # continues the policy that searched
    assert lines(Path(tree1.data)) == lines(round1 / "extract-tree" / "tree.jsonl") != []
    assert trainer.recipes[str(round2 / "train-tree")].model.adapter == str(round1 / "train-sft")

    grpo1, grpo2 = (trainer.recipes[str(run_dir / f"round-{r}" / "train-grpo")] for r in (1, 2))
    assert grpo1.method == "grpo" and grpo1.model.adapter == str(warm)  # from the start policy
    assert grpo2.model.adapter == str(round1 / "train-grpo")  # then its own line
    spec = grpo1.grpo
    assert (spec.env, spec.agent, spec.user, spec.split) == ("toolwoz", "act", "agenda", "train")  # the loop's setup
    assert spec.agent_options == {"examples": 0} and spec.num_generations == 2
    searched = [json.loads(line)["task_id"] for line in lines(round1 / "rollouts" / "trees.jsonl")]
    assert sorted(spec.task_ids) == sorted(searched) and set(grpo2.grpo.task_ids).isdisjoint(spec.task_ids)

    report = load_loop_report(run_dir)
    costs = {c.label: c for c in report.costs}
    calls = [h.llm_calls for h in report.harvest]
    assert all(c > 0 for c in calls)
    assert costs["round 1 JOSH-tree"].llm_calls == costs["round 1 JOSH-SFT"].llm_calls == calls[0]
    assert costs["round 2 JOSH-KTO"].llm_calls == calls[0] + calls[1]
    assert costs["round 2 JOSH-SFT"].tokens == sum(h.prompt_tokens + h.completion_tokens for h in report.harvest)
    assert costs["round 2 GRPO"].llm_calls == 2 * GRPO_CALLS and costs["round 1 GRPO"].tokens == 5700
    assert costs["warm start"].llm_calls == 0 and costs["round 2 GRPO"].spent_on == "GRPO rollouts 1..2"
    harvest = report.harvest[0]
    assert harvest.tree_rows == len(lines(round1 / "extract-tree" / "tree.jsonl"))
    assert harvest.tree_groups >= harvest.tree_zero_groups >= 0 and harvest.tree_groups > 0
    roles = {(c.model, c.baseline): c.role for c in report.comparisons}
    assert roles[("round 1 GRPO", "round 1 JOSH-SFT")] == "GRPO vs JOSH"
    assert roles[("round 1 JOSH-tree", "round 1 JOSH-SFT")] == "tree vs SFT"
    assert roles[("round 2 GRPO", "round 1 JOSH-SFT")] == "round"
    markdown = (run_dir / "report.md").read_text()
    assert "## Cost per model" in markdown and "| round 2 GRPO | GRPO rollouts 1..2 | 80 | 11,400 |" in markdown
    assert "tree rows (groups used / equal skipped)" in markdown


def test_grpo_at_the_search_budget_gets_each_rounds_search_calls(
    tmp_path: Path, two_rounds: tuple[Path, OnlineTrainer, Any]
) -> None:
    trainer = OnlineTrainer()
    Loop(online(tmp_path, rounds=2, grpo_budget="search"), trainer=trainer, builder=counted, progress=False).run()
    plain_dir, plain, _ = two_rounds  # the same loop at the default budget
    for r in (1, 2):
        folder = tmp_path / "scripted" / f"round-{r}"
        searched = json.loads((folder / "rollouts" / "stats.json").read_text())["llm_calls"]
        assert searched > 0 and trainer.recipes[str(folder / "train-grpo")].grpo.max_llm_calls == searched
        assert plain.recipes[str(plain_dir / "scripted" / f"round-{r}" / "train-grpo")].grpo.max_llm_calls is None


def test_a_grpo_policy_searches_the_next_round(tmp_path: Path) -> None:
    Loop(online(tmp_path, rounds=2, policy="grpo"), trainer=OnlineTrainer(), builder=builder, progress=False).run()
    run_dir = tmp_path / "scripted"
    manifest = read_manifest(run_dir / "round-2" / "rollouts")
    assert manifest.inputs["policy"] == input_digest(run_dir / "round-1" / "train-grpo")
    assert load_loop_report(run_dir).headline.model == "round 2 GRPO"


def test_a_tree_arm_without_unequal_siblings_ends_with_a_note(tmp_path: Path) -> None:
    result = Loop(online(tmp_path, warm_start=None), trainer=OnlineTrainer(), builder=hopeless, progress=False).run()
    report = load_loop_report(tmp_path / "scripted")
    note = next(n.message for n in report.notes if n.arm == "JOSH-tree")
    assert "no sibling turns with unequal subtree rewards" in note
    assert report.harvest[0].tree_rows == 0 and report.harvest[0].tree_zero_groups > 0
    assert "round 1 GRPO" in [e.label for e in result.evaluated]  # GRPO needs no search harvest


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sft": None, "kto": None, "warm_start": None, "tree": None, "grpo": None}, "sft, kto, tree or grpo"),
        ({"kto_from": "sft", "policy": "kto"}, "use policy sft or kto_from: base"),
        ({"tree": {**ARM, "model": {"name": "other"}}}, "tree.model.name"),
        ({"policy": "tree", "tree": None}, "names an arm"),
        ({"grpo": None, "grpo_budget": "search"}, "add a grpo arm"),
    ],
)
def test_bad_online_arm_settings_are_refused(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    grpo = {**ARM, "method": "grpo"}
    with pytest.raises(ValueError, match=message):
        recipe(tmp_path, **{"tree": {**ARM, "method": "tree"}, "grpo": grpo, **changes})
