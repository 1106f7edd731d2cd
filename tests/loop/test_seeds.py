"""Independent seeds of the scripted loop, the combined report, pooling by hand, ``josh report`` and the
self-training benchmark's last line."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.metrics import bootstrap, summarize
from josh.loop.pooling import SeedsReport, combine, increment_line, pooled_headline
from josh.loop.render import fmt_interval, start_draws_text
from josh.loop.report import START_DRAWS, LoopReport, ModelEntry, compare, load_loop_report, start_draws
from josh.loop.result import RETRAIN
from josh.loop.seeds import rebuild, run_seeds
from josh.loop.stages.manifest import read_manifest
from josh.run.components import ComponentOptions, Components
from tests.fakes.loop import StubTrainer, builder, merger, recipe

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"^JOSH increment: [+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] over \d+ tasks; seeds excluding zero: \d+/\d+$"
)


def seeded(options: ComponentOptions) -> Components:
    """The noisy oracle, whose noise draws follow the rollout sampling seed (so seeds search differently)."""
    from josh.agents import make_agent

    built = builder(options)
    sampling = options.agent_sampling
    if sampling is not None and sampling.seed is not None:
        built.agent = make_agent("oracle", built.env, noise=built.agent.noise, seed=sampling.seed)
    return built


class SeedTrainer(StubTrainer):
    def __init__(self) -> None:
        super().__init__()
        self.seeds: dict[str, int] = {}

    def __call__(self, recipe: Any, resume: bool) -> Path:
        self.seeds[str(recipe.output_dir / recipe.run_name)] = recipe.seed
        return super().__call__(recipe, resume)


def test_seeds_run_apart_and_pool_into_one_report(tmp_path: Path) -> None:
    trainer = SeedTrainer()
    small = {"eval": {"split": "test", "limit": 6, "max_turns": 10}, "kto": None, "seeds": 2}
    report = run_seeds(recipe(tmp_path, **small), progress=False, trainer=trainer, builder=seeded, merger=merger)
    parent = tmp_path / "scripted"
    assert [r.run_dir for r in report.runs] == ["seed-0", "seed-1"] and [r.seed for r in report.runs] == [0, 1]
    for k in (0, 1):
        folder = parent / f"seed-{k}"
        assert read_manifest(folder / "round-1" / "rollouts").config["rollout"]["sampling"]["seed"] == k
        assert trainer.seeds[str(folder / "round-0" / "warmstart" / "train")] == 42 + k
        assert load_loop_report(folder).headline is not None
    trees = [(parent / f"seed-{k}" / "round-1" / "rollouts" / "trees.jsonl").read_text() for k in (0, 1)]
    assert trees[0] != trees[1]
    assert report.headline is not None and len(report.headline.per_seed) == 2 and report.headline.tasks == 6
    assert json.loads((parent / "report.json").read_text())["kind"] == "seeds"
    markdown = (parent / "report.md").read_text()
    assert "## Seeds" in markdown and "sd (tasks, draws)" in markdown

    assert rebuild(parent) == report  # `josh report` rebuilds the same report from the finished stages
    cli = CliRunner().invoke(app, ["report", str(parent), "--json"])
    assert cli.exit_code == 0 and SeedsReport.model_validate_json(cli.output) == report
    bench = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "self_training.py"), str(parent)],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    last = bench.stdout.strip().splitlines()[-1]
    assert LINE.match(last) and last == increment_line(report.headline)


def entry(label: str, rewards: dict[str, float], arm: str = "") -> ModelEntry:
    per_task = {t: [r] for t, r in rewards.items()}
    return ModelEntry(label=label, arm=arm or label, round=0, folder="-", summary=summarize([]), per_task=per_task)


def seed_report(start: dict[str, float], final: dict[str, float] | None, seed: int) -> LoopReport:
    models = [entry("warm start", start)] + ([entry("round 1 JOSH-SFT", final)] if final else [])
    headline = compare(models[1], models[0], "headline") if final else None
    return LoopReport(
        title="t", run_dir=f"seed-{seed}", seed=seed, start="warm start", headline=headline, models=models
    )


def test_pooled_increment_by_hand() -> None:
    start = {"a": 0.0, "b": 0.0, "c": 0.5}
    reports = [
        seed_report(start, {"a": 1.0, "b": 0.0, "c": 0.5}, 0),  # +1 on a only
        seed_report(start, None, 1),  # no JOSH model: counts as 0 on every task
        seed_report(start, {"a": 1.0, "b": 1.0, "c": 1.5}, 2),  # +1 everywhere: its interval lies above zero
    ]
    pooled = pooled_headline(reports)
    per_task = [(1 + 0 + 1) / 3, (0 + 0 + 1) / 3, (0 + 0 + 1) / 3]
    assert pooled.per_seed == [1 / 3, 0.0, 1.0]
    assert (pooled.tasks, pooled.better, pooled.worse, pooled.above_zero) == (3, 3, 0, 1)
    assert abs(pooled.difference - sum(per_task) / 3) < 1e-12
    iv = bootstrap([[d] for d in per_task])
    assert (pooled.low, pooled.high) == (iv.low, iv.high)
    line = increment_line(pooled)
    assert (
        LINE.match(line) and line.startswith("JOSH increment: +0.444 [") and line.endswith("seeds excluding zero: 1/3")
    )


def test_the_spread_across_seeds_splits_into_task_sampling_and_model_draws() -> None:
    start = {"a": 0.0, "b": 0.0}
    alike = pooled_headline([seed_report(start, {"a": 1.0, "b": 1.0}, 0), seed_report(start, start, 1)])
    assert alike.sampling_sd == 0.0  # every task moved alike within each seed: no sampling error
    assert alike.spread_sd == pytest.approx(0.5**0.5) and alike.draw_sd == pytest.approx(0.5**0.5)
    mixed = pooled_headline([seed_report(start, {"a": 1.0, "b": 0.0}, 0), seed_report(start, start, 1)])
    # seed 0: mean 0.5, standard error sqrt(0.5 / 2) = 0.5; seed 1: 0 and 0. Sampling explains the whole spread.
    assert mixed.spread_sd == pytest.approx(0.125**0.5) and mixed.sampling_sd == pytest.approx(0.125**0.5)
    assert mixed.draw_sd == pytest.approx(0.0, abs=1e-9)
    assert SeedsReport(title="t", run_dir="r", headline=alike).model_dump()["headline"]["draw_sd"] == alike.draw_sd


def test_unfinished_seed_is_left_out_of_the_pool() -> None:
    done = seed_report({"a": 0.0}, {"a": 1.0}, 0)
    stopped = seed_report({"a": 0.0}, None, 1).model_copy(update={"unfinished": "round 1 train-sft"})
    pooled = pooled_headline([done, stopped])
    assert pooled.per_seed == [1.0, None] and pooled.difference == 1.0
    assert increment_line(pooled).endswith("seeds excluding zero: 1/1")  # the stopped seed is not in the count


def test_seeds_refuse_a_folder_that_holds_one_seed(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "loop.yaml").write_text("name: demo\n")
    cli = CliRunner().invoke(
        app,
        ["loop", "-r", str(ROOT / "recipes" / "demo-cpu.yaml"), "--seeds", "2"]
        + ["--set", f"output_dir={tmp_path}", "--set", "name=demo"],
    )
    assert cli.exit_code == 2 and "holds a single-seed run" in cli.output


def test_report_of_a_folder_without_a_loop_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The benchmark's main() in this process: the test above runs its script as a child process."""
    cli = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert cli.exit_code == 2 and "holds no josh loop run" in cli.output
    spec = importlib.util.spec_from_file_location("self_training", ROOT / "benchmarks" / "self_training.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main([str(tmp_path)]) == 2 and "no report.json" in capsys.readouterr().err


def test_the_start_pooled_with_control_retrain_by_hand() -> None:
    start = entry("warm start", {"a": 0.0, "b": 1.0, "c": 0.0})
    start.per_task["c"] = [0.0, 1.0]  # two trials: one draw of 0.5
    retrain = entry(RETRAIN, {"a": 1.0, "b": 1.0, "c": 0.5})
    final = entry("round 1 JOSH-SFT", {"a": 1.0, "b": 0.5, "c": 1.0})
    pooled = start_draws([start, retrain, final], "warm start")
    assert pooled is not None and pooled.label == START_DRAWS
    assert pooled.per_task == {"a": [0.0, 1.0], "b": [1.0, 1.0], "c": [0.5, 0.5]}
    assert pooled.seed_rewards == pytest.approx([0.5, 2.5 / 3])
    assert pooled.summary.average_reward.mean == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert start_draws([start, final], "warm start") is None  # no control-retrain, no pooled start

    vs = compare(final, pooled, "vs the start's two draws")
    assert vs.difference == pytest.approx((0.5 - 0.5 + 0.5) / 3) and (vs.better, vs.worse) == (2, 1)
    reports = []
    for seed in (0, 1):
        report = LoopReport(
            title="t", run_dir=f"seed-{seed}", seed=seed, start="warm start", models=[start, retrain, final],
            headline=compare(final, start, "headline"), comparisons=[vs],
        )  # fmt: skip
        assert report.model(START_DRAWS) == pooled and START_DRAWS not in [m.label for m in report.models]
        assert start_draws_text(report).endswith(f"{fmt_interval(vs.interval, signed=True)} (2 better, 1 worse)")
        assert start_draws_text(report.model_copy(update={"comparisons": []})) is None
        reports.append(report)
    combined = combine(reports, Path("runs"), "t")
    entry_ = next(c for c in combined.comparisons if c.baseline == START_DRAWS)
    assert entry_.per_seed == pytest.approx([vs.difference] * 2) and entry_.tasks == 3


def test_the_loop_compares_its_last_policy_with_both_draws_of_the_start(tmp_path: Path) -> None:
    from josh.loop.runner import Loop
    from tests.fakes.loop import RecordingTrainer
    from tests.loop.plumbing import SMALL_EVAL  # the comparison is checked against compare() on the same report

    changes = {"kto": None, "controls": {"retrain": True}, "eval": SMALL_EVAL}
    Loop(recipe(tmp_path, **changes), trainer=RecordingTrainer(), builder=builder, progress=False).run()
    report = load_loop_report(tmp_path / "scripted")
    vs = next(c for c in report.comparisons if c.baseline == START_DRAWS)
    expected = compare(report.model(vs.model), report.model(START_DRAWS), vs.role)
    assert vs == expected and vs.model == report.headline.model and vs.tasks == report.headline.tasks
    assert START_DRAWS not in [m.label for m in report.models]
    markdown = (tmp_path / "scripted" / "report.md").read_text()
    assert (
        f"Against the start's two training draws (warm start and control-retrain averaged per task; not the "
        f"headline): {fmt_interval(vs.interval, signed=True)}" in markdown
    )
