"""What one seed of ``josh loop`` produced, as the report reads it: the evaluated models, the comparisons the loop
asked for, each round's search and harvest folders, and the arms that ended without a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

RETRAIN = "control-retrain"  # the start policy retrained on its own rows at another training seed


@dataclass
class Evaluated:
    """One evaluated model of the loop: its label, arm (base, warm start, JOSH-SFT, ...), round and folder."""

    label: str
    round: int
    folder: Path
    arm: str = ""
    seeds: list[Path] = field(default_factory=list)  # evaluations of the same model at further training seeds


@dataclass
class Pair:
    """A paired comparison the report computes: ``model`` against ``baseline`` on the same tasks."""

    model: str
    baseline: str
    role: str


@dataclass
class RoundRecord:
    """What one round searched with and where its harvest lies."""

    round: int
    policy: str
    rollouts: Path
    extract: Path
    control: Path | None = None
    tree: Path | None = None  # the tree arm's extraction folder
    own_rollouts: dict[str, Path] = field(default_factory=dict)  # arm -> training folder whose metrics.json counts
    # the LLM calls of the arm's own rollouts (GRPO): such an arm is costed by those, not by the searches


@dataclass
class Note:
    """An arm that ended without a model, and why."""

    arm: str
    round: int
    message: str


@dataclass
class LoopResult:
    """What a loop produced: where, which models were evaluated, which stages ran this time."""

    run_dir: Path
    seed: int | None = None
    evaluated: list[Evaluated] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    rounds: list[RoundRecord] = field(default_factory=list)
    trained: list[tuple[str, Path]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    headline: Pair | None = None
    unfinished: str | None = None
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def is_evaluated(self, label: str) -> bool:
        return any(e.label == label for e in self.evaluated)

    def compare(self, model: str, baseline: str, role: str, *, optional_baseline: bool = False) -> None:
        """Ask the report for ``model`` minus ``baseline`` per task (once per pair). Both must have been evaluated
        (``ValueError`` otherwise), except an ``optional_baseline`` a recipe may leave out (the base model without
        ``baseline: true``, control-retrain without ``controls.retrain``): then there is nothing to compare."""
        for label in (model, baseline):
            if not self.is_evaluated(label) and not (optional_baseline and label == baseline):
                known = ", ".join(e.label for e in self.evaluated) or "none yet"
                raise ValueError(f"cannot compare with {label!r}: no model of that label was evaluated ({known})")
        seen = {(p.model, p.baseline) for p in self.pairs}
        if self.is_evaluated(baseline) and (model, baseline) not in seen:
            self.pairs.append(Pair(model=model, baseline=baseline, role=role))
