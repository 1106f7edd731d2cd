"""``josh data download-retail``: the retail data download as a typer command (work lives in ``download.py``)."""

from __future__ import annotations

from pathlib import Path

import typer

from josh.envs.retail.env import DEFAULT_DATA_DIR


def download_retail_command(
    dest: Path = typer.Option(DEFAULT_DATA_DIR, "--dest", help="folder to fill"),
    commit: str = typer.Option("", "--commit", help="tau-bench commit to fetch (default: the pinned one)"),
) -> None:
    """Fetch τ-bench retail (users, orders, products, policy, train/dev/test tasks) from
    github.com/sierra-research/tau-bench (MIT)."""
    from josh.envs.retail.download import UPSTREAM_COMMIT, DownloadError, download_retail

    try:
        written = download_retail(dest, commit=commit or UPSTREAM_COMMIT)
    except DownloadError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"{len(written)} files written to {dest}")
