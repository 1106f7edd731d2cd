"""``josh export``: finished runs written in another benchmark's own format; ``josh export tau2`` makes a τ²-bench
leaderboard submission (``josh.eval.tau2_submission``)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from josh.util.errors import reports_errors, skips_bad_lines

export_app = typer.Typer(help="Write finished runs in another benchmark's own format.", no_args_is_help=True)


@export_app.command("tau2")
@reports_errors
@skips_bad_lines
def tau2(
    run_dirs: list[str] = typer.Argument(..., help="finished `josh eval` folders on tau2-* envs, one per domain"),
    out: str | None = typer.Option(None, "--out", help="submission folder (default: RUN_DIR/tau2_submission)"),
    email: str | None = typer.Option(None, "--email", help="contact email (submission.json needs it)"),
    organization: str | None = typer.Option(None, "--organization", help="organization (submission.json needs it)"),
    name: str | None = typer.Option(None, "--name", help="contact name"),
    github: str | None = typer.Option(None, "--github", help="contact GitHub user"),
    model_name: str | None = typer.Option(None, "--model-name", help="model name (default: the agent's model)"),
) -> None:
    """τ²'s Results JSON per domain (trajectories/DOMAIN.json) and a leaderboard submission.json, checked by τ²."""
    from josh.envs.tau2.package import require_tau2  # optional: the tau2 extra

    require_tau2()  # first: a missing or other tau2 is one line, and τ²'s import-time logging stays off
    from josh.eval.tau2_submission import Contact, export_tau2  # optional: the tau2 extra

    contact = (
        Contact(email=email, organization=organization, name=name, github=github) if email and organization else None
    )
    done = export_tau2(run_dirs, out, contact=contact, model_name=model_name)
    console = Console(highlight=False)
    for domain in done.domains:
        passes = "  ".join(f"pass^{k} {100 * v:.1f}%" for k, v in sorted(domain.pass_k.items()))
        console.print(
            f"{domain.domain}: {domain.conversations} conversations ({domain.tasks} tasks x {domain.trials} trials) "
            f"-> {escape(domain.file)}  {passes} (τ²'s metrics, equal to josh's summary)",
            soft_wrap=True,
        )
        for problem in domain.leaderboard_problems:
            console.print(f"[yellow]  not leaderboard-ready: {escape(problem)}[/yellow]", soft_wrap=True)
    if done.submission is not None:
        console.print(f"submission: {escape(done.submission)}", soft_wrap=True)
    else:
        console.print(
            "[yellow]submission.json not written: pass --email and --organization (τ²'s leaderboard asks for a "
            "contact)[/yellow]",
            soft_wrap=True,
        )
