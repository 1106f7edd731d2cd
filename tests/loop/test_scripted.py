"""The self-training loop end to end without a model: an oracle agent whose noise depends on the checkpoint acts,
real search, extraction, evaluation and report run, and an injected trainer stands in for TRL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from josh.agents import agent_prompt
from josh.envs import build_env
from josh.loop.runner import Loop
from josh.loop.stages.manifest import read_manifest
from josh.run.components import ComponentOptions, Components
from tests.fakes.loop import StubTrainer, builder, merger, recipe
from tests.loop.plumbing import SMALL_EVAL


def run(tmp_path: Path, trainer: StubTrainer, **changes: Any):
    return Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, merger=merger, progress=False).run()


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StubTrainer, Any]:
    """The default recipe run once for the module: read as it is, or copied by the tests that change it."""
    tmp_path = tmp_path_factory.mktemp("scripted")
    trainer = StubTrainer()
    return tmp_path, trainer, run(tmp_path, trainer)


def copy_of(default_run: tuple[Path, StubTrainer, Any], tmp_path: Path) -> None:
    """The default run's folder copied into ``tmp_path``, as if it had run there."""
    shutil.copytree(default_run[0] / "scripted", tmp_path / "scripted")


def test_loop_runs_every_stage_and_reports(default_run: tuple[Path, StubTrainer, Any]) -> None:
    tmp_path, trainer, result = default_run
    run_dir = tmp_path / "scripted"
    assert [e.label for e in result.evaluated] == ["base", "warm start", "round 1 JOSH-SFT", "round 1 JOSH-KTO"]
    assert [name for name, _, _ in trainer.calls] == ["train", "train-sft", "train-kto"]
    warm_rows = trainer.calls[0][1]
    assert warm_rows == 6
    assert trainer.calls[1][1] > warm_rows  # the SFT arm adds the JOSH ideal paths to the warm start
    summaries = {e.label: json.loads((e.folder / "summary.json").read_text()) for e in result.evaluated}
    assert summaries["round 1 JOSH-SFT"]["average_reward"]["mean"] > summaries["base"]["average_reward"]["mean"]
    eval_manifest = read_manifest(run_dir / "round-1" / "eval-sft")
    from josh.loop.stages.manifest import input_digest

    assert eval_manifest.inputs["model"] == input_digest(run_dir / "round-1" / "train-sft")
    report = (run_dir / "report.md").read_text()
    for label in summaries:
        assert f"| {label} |" in report
    assert "## Harvest" in report and "## Training" in report
    for pair in ("| warm start | base |", "| round 1 JOSH-SFT | warm start |", "| round 1 JOSH-KTO | base |"):
        assert pair in report, pair
    assert (run_dir / "plots" / "reward.png").stat().st_size > 1000
    assert (run_dir / "plots" / "errors.png").is_file()
    kto_rows = [json.loads(line) for line in (run_dir / "round-1" / "extract" / "kto.jsonl").read_text().splitlines()]
    tree = json.loads((run_dir / "round-1" / "rollouts" / "trees.jsonl").read_text().splitlines()[0])
    setup = recipe(tmp_path).setup
    env = build_env(setup.env, setup.data)
    frame = agent_prompt(setup.agent, env, **setup.agent_options).frame(env.tasks("train")[0])
    assert tree["system"] is None  # the stand-in policy is scripted: its trees record no prompt
    assert kto_rows and all(r["tools"] == frame.tools for r in kto_rows)  # the tools the trained agent passes
    assert {r["prompt"][0]["content"] for r in kto_rows} == {frame.system}  # and the prompt it is evaluated with


def test_killed_loop_resumes_at_the_stage_it_died_in(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, StubTrainer(fail_on=2), eval=SMALL_EVAL)
    run_dir = tmp_path / "scripted"
    done = {p: read_manifest(run_dir / p) for p in ("round-0/baseline", "round-1/rollouts", "round-1/extract")}
    assert all(m is not None and m.complete for m in done.values())
    assert not read_manifest(run_dir / "round-1" / "train-sft").complete
    trainer = StubTrainer()
    result = run(tmp_path, trainer, eval=SMALL_EVAL)
    assert [name for name, _, _ in trainer.calls] == ["train-sft", "train-kto"]
    assert set(result.skipped) >= {"eval base", "warm-start data", "warm-start train", "round 1 rollouts"}
    for path, manifest in done.items():
        assert read_manifest(run_dir / path).finished_at == manifest.finished_at
    again = StubTrainer()
    assert run(tmp_path, again, eval=SMALL_EVAL).ran == [] and again.calls == []


def test_changed_settings_rerun_only_what_depends_on_them(
    default_run: tuple[Path, StubTrainer, Any], tmp_path: Path
) -> None:
    copy_of(default_run, tmp_path)
    trainer = StubTrainer()
    result = run(tmp_path, trainer, eval={"split": "test", "limit": 5, "max_turns": 10, "trials": 2})
    assert trainer.calls == []
    assert set(result.ran) == {"eval base", "eval warm start", "eval round 1 JOSH-SFT", "eval round 1 JOSH-KTO"}
    stale = list((tmp_path / "scripted" / "round-0").glob("baseline.stale-*"))
    assert len(stale) == 1 and (stale[0] / "results.jsonl").is_file()  # the old results are kept, not deleted


def test_backend_settings_reach_every_stage_and_count_as_settings(
    default_run: tuple[Path, StubTrainer, Any], tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []

    def recording(options: ComponentOptions) -> Components:
        seen.append(options.llm_options)
        return builder(options)

    copy_of(default_run, tmp_path)
    setup = {"agent": "act", "backend": "scripted", "model": "base", "agent_options": {"examples": 0}}
    changed = recipe(tmp_path, setup={**setup, "llm_options": {"max_batch_size": 4}})
    result = Loop(changed, trainer=StubTrainer(), builder=recording, progress=False).run()
    assert "eval base" in result.ran and "round 1 rollouts" in result.ran
    assert seen and all(options == {"max_batch_size": 4} for options in seen)


def test_sft_from_policy_continues_the_adapter_on_new_rows_only(tmp_path: Path) -> None:
    trainer = StubTrainer()
    result = run(tmp_path, trainer, rounds=2, kto=None, accumulate=False, sft_from="policy", eval=SMALL_EVAL)
    run_dir = tmp_path / "scripted"
    assert [name for name, _, _ in trainer.calls] == ["train", "train-sft", "train-sft"]
    warm = run_dir / "round-0" / "warmstart" / "train"
    assert trainer.starts == [None, str(warm), str(run_dir / "round-1" / "train-sft")]
    round_rows = [
        sum(1 for _ in (run_dir / f"round-{r}" / "extract" / "sft.jsonl").open()) for r in (1, 2)
    ]  # fmt: skip
    assert [rows for _, rows, _ in trainer.calls[1:]] == round_rows
    assert "round 2 train-sft" in result.ran


def test_second_round_searches_new_tasks_with_the_newest_checkpoint(tmp_path: Path) -> None:
    from josh.loop.stages.manifest import input_digest

    result = run(tmp_path, StubTrainer(), rounds=2, kto=None, eval=SMALL_EVAL)
    run_dir = tmp_path / "scripted"
    manifest = read_manifest(run_dir / "round-2" / "rollouts")
    assert manifest.inputs["policy"] == input_digest(run_dir / "round-1" / "train-sft")
    first = read_manifest(run_dir / "round-1" / "rollouts").config["tasks"]
    assert not set(first) & set(manifest.config["tasks"])
    assert [e.round for e in result.evaluated] == [0, 0, 1, 2]
    assert (run_dir / "plots" / "rounds.png").is_file()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sft": None, "kto": None}, "at least one training arm"),
        ({"policy": "kto", "kto": None}, "names an arm"),
        ({"setup": {"model": "other"}}, "must be the loop's base model"),
        ({"rounds": 0}, "greater than or equal to 1"),
        ({"sft_from": "policy"}, "set accumulate: false"),
    ],
)
def test_bad_recipes_are_refused(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recipe(tmp_path, **changes)


def test_loop_recipe_files_load_and_unknown_keys_are_named(tmp_path: Path) -> None:
    from josh.loop.recipe import load_loop_recipe
    from josh.training.recipe import RecipeError

    root = Path(__file__).resolve().parents[2] / "recipes"
    demo = load_loop_recipe(root / "demo-cpu.yaml")
    paper = load_loop_recipe(root / "loop-paper-llama3-8b.yaml", ["rounds=2"])
    assert demo.setup.backend == "hf" and paper.rounds == 2 and paper.sft and paper.kto
    science = load_loop_recipe(root / "science-cpu.yaml", ["seeds=5"])
    assert science.rounds == 2 and science.kto_from == "sft" and science.controls.random and science.controls.retrain
    assert science.controls.random_rows == "match" and science.rollout.tasks == 60
    assert science.controls.rounds == [science.rounds] and not science.sft.optim.gradient_checkpointing
    assert science.eval.limit == 50 and science.extract.trim_at_failure and demo.extract.trim_at_failure
    assert paper.rollout.search.max_beam == 8 and paper.rollout.search.branching == 2
    few = load_loop_recipe(root / "science-6demos-cpu.yaml")
    assert (
        few.warm_start.tasks == 6 and few.warm_sft.optim.num_train_epochs == 8 and few.sft.optim.num_train_epochs == 2
    )
    same = few.model_copy(update={"name": science.name, "seeds": science.seeds, "warm_start": science.warm_start})
    assert same == science  # the 6-demonstration recipe differs from science-cpu in its warm start only
    longer = load_loop_recipe(root / "science-6demos-minsteps-cpu.yaml")
    assert longer.sft.optim.min_steps == 24 and few.sft.optim.min_steps == 0
    optim = longer.sft.optim.model_copy(update={"min_steps": 0})
    assert longer.model_copy(update={"name": few.name, "sft": longer.sft.model_copy(update={"optim": optim})}) == few
    fixed = load_loop_recipe(root / "science-6demos-kto-cpu.yaml")
    assert fixed.policy == "kto" and fixed.train_seeds == 2 and longer.policy == "sft" and longer.train_seeds == 1
    assert fixed.model_copy(update={"name": longer.name, "policy": "sft", "train_seeds": 1}) == longer
    arms = load_loop_recipe(root / "arms-cpu.yaml")
    assert all(getattr(arms, arm) is not None for arm in ("sft", "kto", "tree", "grpo")) and arms.kto_from == "sft"
    assert arms.grpo_budget == "search" and arms.tree.model.name == arms.grpo.model.name == arms.setup.model
    assert not arms.baseline and not any(
        getattr(arms, a).optim.gradient_checkpointing for a in ("sft", "kto", "tree", "grpo")
    )
    with pytest.raises(RecipeError, match="did you mean 'rounds'"):
        load_loop_recipe(root / "demo-cpu.yaml", ["round=2"])


def test_a_plot_is_drawn_again_only_when_what_it_shows_changed(tmp_path: Path) -> None:
    from josh.eval.metrics import summarize
    from josh.loop.plots import plot_errors, plot_reward, plot_rounds
    from josh.loop.report import ModelEntry

    def model(label: str, round_: int, **summary: Any) -> ModelEntry:
        summary_ = summarize([]).model_copy(update=summary)
        return ModelEntry(label=label, arm=label, round=round_, folder="-", summary=summary_)

    models = [model("warm start", 0), model("round 1 JOSH-SFT", 1)]
    paths = [plot_reward(models, tmp_path / "r.png"), plot_errors(models, tmp_path / "e.png")]
    paths.append(plot_rounds(models, "warm start", tmp_path / "n.png"))
    for p in paths:
        p.write_bytes(b"kept")  # a plot drawn again would replace these bytes
    assert plot_reward(models, tmp_path / "r.png") == paths[0] and plot_errors(models, tmp_path / "e.png") == paths[1]
    assert plot_rounds(models, "warm start", tmp_path / "n.png") == paths[2]
    assert all(p.read_bytes() == b"kept" for p in paths)
    changed = [models[0], model("round 1 JOSH-SFT", 1, conversations=3)]
    plot_reward(changed, tmp_path / "r.png")
    plot_rounds(models, "round 1 JOSH-SFT", tmp_path / "n.png")
    (tmp_path / ".e.png.sha256").unlink()
    plot_errors(models, tmp_path / "e.png")
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)  # new models, a new start, a lost stamp


def _tree(folder: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime) for p in folder.rglob("*")}


def test_a_plan_of_a_finished_run_skips_every_stage_it_ran_and_writes_nothing(
    default_run: tuple[Path, StubTrainer, Any], tmp_path: Path
) -> None:
    copy_of(default_run, tmp_path)
    before = _tree(tmp_path)
    planned = Loop(recipe(tmp_path), trainer=StubTrainer(), builder=builder, merger=merger).plan()
    assert [stage.name for stage in planned] == default_run[2].ran
    assert not any(stage.runs for stage in planned)
    assert _tree(tmp_path) == before


def test_a_plan_lists_what_is_left_with_its_bound(default_run: tuple[Path, StubTrainer, Any], tmp_path: Path) -> None:
    copy_of(default_run, tmp_path)
    shutil.rmtree(tmp_path / "scripted" / "round-1" / "eval-kto")
    planned = Loop(recipe(tmp_path), trainer=StubTrainer(), builder=builder, merger=merger).plan()
    runs = [stage for stage in planned if stage.runs]
    assert [stage.name for stage in runs] == ["eval round 1 JOSH-KTO"]
    # 10 tasks x 2 trials, at most 10 turns of at most 3 generations (act's max_generations) each; a rule-based user
    assert runs[0].bound.agent_calls == 10 * 2 * 10 * 3 and runs[0].bound.user_calls == 0
    fresh = Loop(recipe(tmp_path / "new"), trainer=StubTrainer(), builder=builder, merger=merger).plan()
    assert [stage.name for stage in fresh] == default_run[2].ran and all(stage.runs for stage in fresh)
    assert not (tmp_path / "new").exists()
