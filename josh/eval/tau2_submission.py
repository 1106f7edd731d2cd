"""``josh export tau2``: finished τ² evaluations written as a τ²-bench leaderboard submission folder.

The folder is the one τ²'s ``prepare_submission`` makes (``tau2.scripts.leaderboard``): ``trajectories/<domain>.json``
(τ²'s ``Results``, one file per domain, from ``josh.eval.tau2_export``) and ``submission.json`` (τ²'s ``Submission``:
pass^1..4 in percent from ``tau2.metrics``, the models, and a methodology naming josh's user simulator and the τ²
release). ``submission.json`` needs a contact (``email`` and ``organization``); without one only the trajectories
are written. Before anything is written, τ²'s own checks run on every trajectory file: it must load as ``Results``
(else nothing is written), and whether the leaderboard would take it (every base task, the same trials each) is
reported. The whole folder is written at once (``write_folder_atomic``): a failed export leaves nothing behind.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from pathlib import Path

from pydantic import BaseModel
from tau2.data_model.simulation import Results
from tau2.metrics.agent_metrics import compute_metrics
from tau2.scripts.leaderboard.prepare_submission import validate_submission_traj_set
from tau2.scripts.leaderboard.submission import (
    SUBMISSION_FILE_NAME,
    TRAJECTORY_FILES_DIR_NAME,
    ContactInfo,
    DomainResults,
    Methodology,
    Submission,
)
from tau2.scripts.leaderboard.submission import Results as Scores
from tau2.scripts.leaderboard.verify_trajectories_public import check_format, check_num_trials, check_tasks

from josh.envs.tau2 import RELEASE
from josh.eval.tau2_export import ExportError, Tau2Run, read_run, to_results, user_note
from josh.util.atomic import write_atomic, write_folder_atomic

EXPORT_DIR = "tau2_submission"
LEADERBOARD_TRIALS = 4


class Contact(BaseModel):
    """Who submits: τ²'s leaderboard asks for an email and an organization."""

    email: str
    organization: str
    name: str | None = None
    github: str | None = None


class DomainExport(BaseModel):
    """What the export wrote for one domain, and what τ²'s own checks said of it."""

    domain: str
    run_dir: str
    file: str
    conversations: int
    tasks: int
    trials: int
    pass_k: dict[int, float]
    leaderboard_problems: list[str]


class Export(BaseModel):
    """What ``josh export tau2`` wrote: one entry per domain and the submission file, if one was written."""

    out: str
    domains: list[DomainExport]
    submission: str | None


def default_out(run_dirs: list[str]) -> Path:
    """``RUN_DIR/tau2_submission`` for one run; several runs need ``--out``."""
    if len(run_dirs) != 1:
        raise ExportError("several runs go into one submission: name its folder with --out")
    return Path(run_dirs[0]) / EXPORT_DIR


def check_out(out: Path) -> None:
    """Refuse an output folder that holds anything but an earlier export (it is replaced as a whole)."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file: choose a folder for the export")
    if out.is_dir() and any(p.name not in (SUBMISSION_FILE_NAME, TRAJECTORY_FILES_DIR_NAME) for p in out.iterdir()):
        raise ExportError(f"{out} holds other files than an earlier export: choose a new folder with --out")


def pass_k_of(results: Results) -> dict[int, float]:
    """pass^k by τ²'s own metrics (``tau2.metrics.agent_metrics.compute_metrics``)."""
    return {int(k): float(v) for k, v in compute_metrics(results).pass_hat_ks.items()}


def leaderboard_problems(results: Results, run: Tau2Run) -> list[str]:
    """Why τ²'s leaderboard would not take this file (τ²'s ``check_tasks`` / ``check_num_trials``), in short."""
    problems = []
    tasks_ok, why = check_tasks(results)
    if not tasks_ok:  # τ²'s message lists every missing id: its first words say enough
        problems.append(
            f"τ²'s task check: {why.split(':')[0].lower()} (the run has {len(results.tasks)} tasks of split "
            f"{run.info.split}; the leaderboard wants every base task)"
        )
    trials_ok, why = check_num_trials(results)
    if not trials_ok:
        problems.append(f"τ²'s trial check: {why.lower()}")
    if run.summary.trials < LEADERBOARD_TRIALS:
        problems.append(f"{run.summary.trials} trials: the leaderboard reports pass^1..4 (--trials 4)")
    return problems


def _scores(results: Results, pass_k: dict[int, float]) -> DomainResults:
    costs = [s.agent_cost for s in results.simulations]
    cost = None if any(c is None for c in costs) else math.fsum(c or 0.0 for c in costs) / len(costs)
    percent = {f"pass_{k}": 100 * pass_k[k] for k in range(1, LEADERBOARD_TRIALS + 1) if k in pass_k}
    return DomainResults(**percent, cost=cost)


def submission(runs: list[Tau2Run], results: list[Results], contact: Contact, model_name: str | None) -> Submission:
    """τ²'s ``Submission`` for the domains of ``runs``: scores from τ²'s metrics, josh's user simulator named."""
    first = runs[0].info
    scores = {run.domain: _scores(res, pass_k_of(res)) for run, res in zip(runs, results, strict=True)}
    trials = ", ".join(f"{run.domain} {len(run.records)} conversations" for run in runs)
    return Submission(
        model_name=model_name or first.model or f"josh:{first.agent}",
        organization=contact.organization,
        submission_date=date.today(),
        contact_info=ContactInfo(email=contact.email, name=contact.name, github=contact.github),
        results=Scores(**scores),
        methodology=Methodology(
            evaluation_date=datetime.fromisoformat(first.started).date(),
            tau2_bench_version=RELEASE,
            user_simulator=f"josh:{first.user}" + (f" ({first.user_model})" if first.user_model else ""),
            notes=f"Evaluated with josh (`josh eval`, agent `{first.agent}`): {trials}. {user_note(first)}.",
        ),
    )


def _setup(run: Tau2Run) -> str:
    """The agent and user simulator of a run, with their models, in words."""
    info = run.info
    agent = info.agent + (f" ({info.model}{', ' + info.adapter if info.adapter else ''})" if info.model else "")
    return f"agent {agent}, user {info.user}" + (f" ({info.user_model})" if info.user_model else "")


def export_tau2(
    run_dirs: list[str], out: str | Path | None = None, *, contact: Contact | None = None, model_name: str | None = None
) -> Export:
    """Export finished τ² evaluations (one per domain) into a leaderboard submission folder (module docstring)."""
    if not run_dirs:
        raise ExportError("name at least one `josh eval` run folder")
    target = Path(out) if out is not None else default_out(run_dirs)
    check_out(target)
    runs = [read_run(run_dir) for run_dir in run_dirs]
    domains = [run.domain for run in runs]
    repeated = sorted({d for d in domains if domains.count(d) > 1})
    if repeated:
        raise ExportError(f"one run per domain: {', '.join(repeated)} comes more than once")
    setups = {run.domain: _setup(run) for run in runs}
    if len(set(setups.values())) > 1:
        described = "; ".join(f"{domain}: {setup}" for domain, setup in setups.items())
        raise ExportError(f"the runs do not make one submission: one agent and user for all domains ({described})")
    results = [to_results(run) for run in runs]
    same, why = validate_submission_traj_set(results)
    if not same:
        raise ExportError(f"the runs do not make one submission: {why}")
    exported: list[DomainExport] = []

    def fill(folder: Path) -> None:
        for run, result in zip(runs, results, strict=True):
            file = folder / TRAJECTORY_FILES_DIR_NAME / f"{run.domain}.json"
            write_atomic(file, result.model_dump_json(indent=2))
            loaded, ok, error = check_format(file)
            if not ok or loaded is None:
                raise ExportError(f"τ² cannot load the exported {run.domain} results: {error}")
            pass_k = pass_k_of(loaded)
            if pass_k.keys() != run.summary.pass_k.keys() or any(
                abs(pass_k[k] - run.summary.pass_k[k]) > 1e-9 for k in pass_k
            ):
                raise ExportError(f"τ²'s pass^k {pass_k} differs from the run's {run.summary.pass_k} on {run.path}")
            exported.append(
                DomainExport(
                    domain=run.domain,
                    run_dir=str(run.path),
                    file=str(target / TRAJECTORY_FILES_DIR_NAME / file.name),
                    conversations=len(run.records),
                    tasks=len(loaded.tasks),
                    trials=run.summary.trials,
                    pass_k=pass_k,
                    leaderboard_problems=leaderboard_problems(loaded, run),
                )
            )
        if contact is not None:
            text = submission(runs, results, contact, model_name).model_dump_json(indent=2, exclude_none=True)
            write_atomic(folder / SUBMISSION_FILE_NAME, text)

    write_folder_atomic(target, fill)
    return Export(
        out=str(target),
        domains=exported,
        submission=str(target / SUBMISSION_FILE_NAME) if contact is not None else None,
    )
