"""The self-training loop (``josh loop``): which stages run, on what, and what each model is compared with.

A baseline evaluation, an optional scripted warm start, then ``rounds`` of JOSH rollouts → extraction → SFT
and/or KTO → evaluation on the same held-out tasks, optional controls, and a report. Layout under the run folder
(``<output_dir>/<name>/``)::

    loop.yaml                        the resolved recipe
    round-0/baseline/                evaluation of the base model
    round-0/warmstart/data/ train/ eval/   scripted demonstrations (or warm_start.rows), the SFT adapter trained on
                                     them, its evaluation
    round-0/warmstart-kto/data/ merge/ train/ eval/   warm_start.kto_rows, the warm start merged, KTO on it (warm_kto;
                                     the policy of round 1 with warm_start.searches: kto)
    round-0/control-retrain/train/ eval/   the start policy retrained on its own rows (controls.retrain)
    round-R/rollouts/                JOSH search trees of round R (the policy of round R-1 searches)
    round-R/extract/                 sft.jsonl, kto.jsonl, dpo.jsonl, extract_stats.json
    round-R/train-sft/ eval-sft/     the SFT arm (JOSH-SFT)
    round-R/merge-sft/               the SFT policy folded into a full model (kto_from: sft)
    round-R/merge-policy/            the policy that searched, folded into a full model (sft_from: merged-policy,
                                     kto_from: policy)
    round-R/control-more-sft/ control-more-kto/   train/ eval/: that arm's start trained as many steps on the
                                     policy's own rows (controls.more)
    round-R/train-kto/ eval-kto/     the KTO arm: JOSH-KTO on the base, or JOSH-SFT+KTO on merge-sft
    round-R/control-random/data/ train/ eval/   one random branch per tree instead of the ideal path (data/ only in
                                     a round before the last control round: its rows accumulate)
    round-R/extract-tree/ train-tree/ eval-tree/ train-grpo/ eval-grpo/   the tree and GRPO arms (josh.loop.arms)
    <train>-seed<k>/ <eval>-seed<k>/ a model at its k-th further training seed (train_seeds); KTO on SFT trains
                                     on that seed's SFT model, merged into merge-sft-seed<k>/
    report.md, report.json, plots/

The SFT arm is retrained from the base model each round on the warm-start rows plus every round's ideal paths so
far (``accumulate``), or continues the adapter that searched, on the round's rows only (``sft_from: policy``). The
KTO arm trains a fresh adapter on the good/bad turns (every round's so far with ``accumulate``), on the base model or
(``kto_from: sft``) on the round's SFT policy merged into a full model, so KTO's reference model is that SFT policy. ``policy`` picks the arm
whose model searches the next round. An arm with nothing to train on ends with a note; the loop goes on.

The headline is JOSH's own increment: the newest model of the policy arm against the policy that ran the first
search (the warm start, or the base model without one), paired per held-out task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from josh.loop.arms import check_arms
from josh.loop.arms.base import BASE, Model, Round, model_label
from josh.loop.arms.control_more import run_control_more
from josh.loop.arms.control_random import draws_in, run_control_random
from josh.loop.arms.control_retrain import run_control_retrain
from josh.loop.arms.warm_start import run_warm_start
from josh.loop.recipe import LoopRecipe
from josh.loop.render import save_report
from josh.loop.report import build_report
from josh.loop.result import RETRAIN, Evaluated, LoopResult, Note, Pair, RoundRecord
from josh.loop.served import ServedPolicy
from josh.loop.stages import (
    Builder,
    EvalStage,
    ExtractStage,
    Merger,
    MergeStage,
    Planned,
    RolloutStage,
    StageContext,
    Trainer,
    TrainStage,
    Unfinished,
    merge_with_peft,
    rollout_tasks,
    train_with_trl,
)
from josh.run.components import build_components
from josh.training.launcher import LaunchedTrainer
from josh.training.recipe import TrainRecipe
from josh.util.atomic import write_atomic
from josh.util.layout import LOOP_RECIPE

TRAIN_SEED_STEP = 100  # train_seeds: the k-th further training seed of a model is its seed + k * TRAIN_SEED_STEP


class Loop:
    """Runs one seed of a ``LoopRecipe`` stage by stage; see the module docstring. The trainer, the component
    builder and the merger are injected (tests run the whole loop without a model; the default trainer trains in this
    process, or through ``accelerate launch`` with the recipe's ``launch``); ``dry`` runs nothing and reports what is
    done. An agent on the openai backend is a vLLM server that loads each trained adapter (``josh.loop.served``)."""

    def __init__(
        self,
        recipe: LoopRecipe,
        *,
        trainer: Trainer | None = None,
        builder: Builder = build_components,
        merger: Merger = merge_with_peft,
        console: Console | None = None,
        progress: bool = True,
        dry: bool = False,
    ) -> None:
        self.arms = check_arms(recipe)  # looked up once: a round runs the arms the loop started with
        self.recipe = recipe
        if trainer is None:
            trainer = LaunchedTrainer(recipe.launch) if recipe.launch is not None else train_with_trl
        served = ServedPolicy(recipe) if recipe.setup.backend == "openai" else None
        self.ctx = StageContext(recipe, trainer, builder, merger, console or Console(), progress, dry, served)
        self.run_dir = recipe.run_dir
        self.grpo_start: Path | None = None

    @property
    def result(self) -> LoopResult:
        return self.ctx.result

    def run(self) -> LoopResult:
        """Run (or resume) every stage, then write the report. A dry loop runs nothing and reports what is done."""
        if self.recipe.seeds > 1:
            raise ValueError(f"the recipe asks for {self.recipe.seeds} seeds: run it with josh.loop.seeds.run_seeds")
        if not self.ctx.dry:
            self._check()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.run_dir / LOOP_RECIPE, self.recipe.to_yaml())
        try:
            self._run()
        except Unfinished as exc:
            self.result.unfinished = str(exc)
        self.write_report()
        return self.result

    def plan(self) -> list[Planned]:
        """Every stage the loop would run or skip (finished for the same settings and inputs), in order, each with
        at most what it costs; the checks a run makes first are made, and nothing runs or is written."""
        self._check()
        self.ctx.plan = []
        self._run()
        return self.ctx.plan

    def _check(self) -> None:
        """What a run checks before its first stage: the launch config, the agent's server, the run folder."""
        if self.recipe.launch is not None:
            self.recipe.launch.check()
        if self.ctx.served is not None:
            self.ctx.served.check()
        if (self.run_dir / "seeds.yaml").is_file():
            raise ValueError(f"{self.run_dir} holds a run of several seeds; give this run another name")

    def _run(self) -> None:
        recipe = self.recipe
        round0 = self.run_dir / "round-0"
        self.policy: str | Path = str(recipe.setup.model)
        self.policy_label = BASE
        self.sft_sources: list[Path] = []
        self.kto_sources: list[Path] = []
        self.control_sources: list[Path] = []  # control-random's rows so far: random branches, never ideal paths
        self.draws: dict[str, list[Path | None]] = {}  # a model's further training draws (train_seeds), by label
        self.warm_kto_rows: Path | None = None  # the warm start's KTO rows (warm_kto), which control-more trains on
        for r in range(1, recipe.rounds + 1):
            rollout_tasks(self.ctx, r)  # every round has tasks to search, checked before hours of work
        if recipe.baseline:
            self.evaluate(BASE, 0, round0 / "baseline", self.policy, BASE)
        warm: Path | None = None
        if recipe.warm_start is not None and recipe.warm_start.enabled and recipe.sft is not None:
            warm_start = run_warm_start(self, recipe.warm_start)
            warm, self.warm_kto_rows = warm_start.rows, warm_start.kto_rows
            self.sft_sources.append(warm)
            self.control_sources.append(warm)
            self.policy, self.policy_label = warm_start.policy, warm_start.label
        start = self.policy_label
        self.grpo_start = self.policy if isinstance(self.policy, Path) else None
        if recipe.controls.retrain:
            run_control_retrain(self, warm, start)
        final: str | None = None
        for r in range(1, recipe.rounds + 1):
            final = self._round(r) or final
        self._headline(final, start)

    # stages -----------------------------------------------------------------------------------------------

    def evaluate(self, label: str, round_: int, folder: Path, model: str | Path, arm: str) -> None:
        """Evaluate ``model`` on the held-out tasks into ``folder`` (resumable)."""
        self.ctx.execute(EvalStage(self.ctx, label, folder, model))
        self.result.evaluated.append(Evaluated(label=label, round=round_, folder=folder, arm=arm))

    def train_stage(self, name: str, folder: Path, arm: TrainRecipe, *args: Any, **how: Any) -> TrainStage:
        """Train one arm (see ``TrainStage`` for the arguments); a trained model is listed for the report."""
        stage = TrainStage(self.ctx, name, folder, arm, *args, **how)
        self.ctx.execute(stage)
        if stage.adapter is not None:
            self.result.trained.append((name, folder))
        return stage

    def train(self, name: str, folder: Path, arm: TrainRecipe, *args: Any, **how: Any) -> Path | None:
        """The trained model folder, or ``None`` when the rows could not be trained on (see ``TrainStage``)."""
        return self.train_stage(name, folder, arm, *args, **how).adapter

    def merge(self, name: str, adapter: Path, folder: Path, dtype: str) -> Path:
        """The adapter folded into its base model: a full model folder with the adapter's tokenizer."""
        self.ctx.execute(MergeStage(self.ctx, name, adapter, folder, dtype))
        return folder

    def merge_draws(self, name: str, draws: list[Path | None], folder: Path, dtype: str) -> list[Path | None]:
        """A model's further training draws (``draws``, as ``seed_variants`` keeps them) each merged into
        ``<folder>-seed<k>/``; ``None`` where a draw is missing."""
        return [
            self.merge(f"{name} (seed {k})", d, folder.with_name(f"{folder.name}-seed{k}"), dtype) if d else None
            for k, d in enumerate(draws, 1)
        ]

    def merged_policy(self, round_: Round, dtype: str) -> tuple[Path | None, list[Path | None] | None]:
        """The policy that searched ``round_`` merged into a full model (``round-R/merge-policy/``) and, with
        ``train_seeds``, each of its further draws (``merge-policy-seed<k>/``, ``None`` where a draw is missing);
        ``(None, None)`` when the policy is the base model itself, which arms train on as it is."""
        if round_.merged is None:
            if not isinstance(round_.policy, Path):
                round_.merged = (None, None)
            else:
                r, folder = round_.number, round_.folder
                base = self.merge(f"round {r} merge-policy", round_.policy, folder / "merge-policy", dtype)
                draws = self.draws.get(round_.policy_label, [])
                bases = self.merge_draws(f"round {r} merge-policy", draws, folder / "merge-policy", dtype)
                bases += [None] * (self.recipe.train_seeds - 1 - len(bases))
                round_.merged = (base, bases)
        return round_.merged

    def rollouts(self, round_: int, policy: str | Path) -> RolloutStage:
        stage = RolloutStage(self.ctx, round_, policy)
        self.ctx.execute(stage)
        return stage

    def extract(
        self, round_: int, rollouts: RolloutStage, *, control_seed: int | None = None, control_rows: int | None = None
    ) -> ExtractStage:
        stage = ExtractStage(self.ctx, round_, rollouts.trees, control_seed=control_seed, control_rows=control_rows)
        self.ctx.execute(stage)
        return stage

    # arms -------------------------------------------------------------------------------------------------

    def note(self, arm: str, round_: int, message: str) -> None:
        """An arm ended without a model: say why in the report and on the terminal."""
        self.result.notes.append(Note(arm=arm, round=round_, message=message))
        self.ctx.log(f"  ! {arm}{f' round {round_}' if round_ else ''}: {message}")

    def _headline(self, final: str | None, start: str) -> None:
        if final is None:
            self.note("JOSH", 0, "no round trained a model of the policy arm: JOSH did not change the policy")
        elif not self.result.is_evaluated(start):
            self.note("JOSH", 0, f"the start policy ({start}) was not evaluated: set baseline: true for the headline")
        else:
            self.result.headline = Pair(model=final, baseline=start, role="headline")
            self.result.compare(final, start, "headline")
            self.result.compare(final, RETRAIN, "JOSH vs control", optional_baseline=True)

    def _round(self, r: int) -> str | None:
        """One round: search, extract, every enabled arm in order, the controls; returns the label of the policy
        arm's new model, if it trained one."""
        recipe = self.recipe
        rollouts = self.rollouts(r, self.policy)
        extracted = self.extract(r, rollouts)
        record = RoundRecord(round=r, policy=self.policy_label, rollouts=rollouts.folder, extract=extracted.folder)
        self.result.rounds.append(record)
        round_ = Round(
            number=r, folder=self.run_dir / f"round-{r}", rollouts=rollouts, extracted=extracted,
            policy=self.policy, policy_label=self.policy_label,
            start=self.policy if recipe.sft_from == "policy" and isinstance(self.policy, Path) else None,
            prior_sft=list(self.sft_sources) if recipe.accumulate else [],
        )  # fmt: skip
        for arm in self.arms:
            if arm.enabled(recipe):
                round_.models[arm.key] = arm.run(self, round_)
        if draws_in(self, r):
            record.control = run_control_random(self, round_)
        if recipe.controls.more:
            run_control_more(self, round_, self.sft_sources[0] if self.sft_sources else None, self.warm_kto_rows)
        if recipe.accumulate:
            self.sft_sources.append(extracted.sft)
            self.kto_sources.append(extracted.kto)
        chosen = round_.models.get(recipe.policy_arm)
        if chosen is None:
            return None
        self.policy, self.policy_label = chosen
        return chosen[1]

    def seed_variants(
        self,
        label: str,
        train: Path,
        evaluation: Path,
        rows: list[Path],
        arm: TrainRecipe | None = None,
        method: str = "sft",
        bases: list[Path | None] | None = None,
        evaluate: bool = True,
        **how: Any,
    ) -> None:
        """``train_seeds``: the model ``label`` trained and evaluated again at each further training seed (its rows
        reshuffled) into ``<train>-seed<k>/`` and ``<evaluation>-seed<k>/``; the report pools them, and ``draws``
        keeps their adapters. ``arm``: the training recipe (default: the sft arm); ``bases``: the k-th draw's base
        model (KTO on the k-th SFT draw), ``None`` where that draw has none; ``evaluate=False``: trained only (the
        start of other models), never evaluated."""
        arm = arm or self.recipe.sft
        assert arm is not None
        entry = next((e for e in self.result.evaluated if e.label == label), None)
        where = (entry.arm, entry.round) if entry is not None else (label, 0)
        self.draws[label] = []
        for k in range(1, self.recipe.train_seeds):
            name, suffix = f"{label} train (seed {k})", f"-seed{k}"
            if bases is not None and bases[k - 1] is None:
                self.note(*where, f"training seed {k} has no model of its own to start from")
                self.draws[label].append(None)
                continue
            base = {"base": bases[k - 1]} if bases is not None else {}
            stage = self.train_stage(
                name, train.with_name(train.name + suffix), arm, rows, method,
                seed_offset=k * TRAIN_SEED_STEP, shuffle=True, **base, **how,
            )  # fmt: skip
            self.draws[label].append(stage.adapter)
            if stage.adapter is None:
                self.note(*where, f"training seed {k} could not be trained: {stage.why_ended()}")
                continue
            if not evaluate or entry is None:
                continue
            folder = evaluation.with_name(evaluation.name + suffix)
            self.ctx.execute(EvalStage(self.ctx, f"{label} (seed {k})", folder, stage.adapter))
            entry.seeds.append(folder)

    def evaluate_arm(self, r: int, arm: str, train: TrainStage, folder: Path, policy_label: str | None) -> Model | None:
        """Evaluate a round's new model and compare it with the policy that searched and with the base model."""
        if train.adapter is None:
            self.note(arm, r, f"could not be trained: {train.why_ended()}")
            return None
        label = model_label(r, arm)
        self.evaluate(label, r, folder, train.adapter, arm)
        if policy_label is not None:
            self.result.compare(label, policy_label, "round", optional_baseline=True)
            self.result.compare(label, BASE, "vs base", optional_baseline=True)
        return train.adapter, label

    def write_report(self) -> Path:
        title = "josh loop: " + "/".join(self.run_dir.parts[-2:])
        path = save_report(build_report(self.result, title=title), self.run_dir)
        self.ctx.log(f"report -> {path}")
        return path
