import json

from typer.testing import CliRunner

from josh.cli import app


def test_josh_eval_oracle_agenda_on_mini_reaches_full_reward_and_resumes(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "10", "--trials", "2", "--out", str(out)]
    first = CliRunner().invoke(app, [*args, "--no-progress"])
    assert first.exit_code == 0, first.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conversations"] == 20 and summary["average_reward"]["mean"] == 1.0
    again = CliRunner().invoke(app, [*args, "--no-progress"])
    assert again.exit_code == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 20


def test_josh_eval_rejects_unknown_names_with_one_clear_error(tmp_path):
    bad = CliRunner().invoke(app, ["eval", "--agent", "wizard", "--user", "agenda", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown agent strategy" in bad.output


def test_replay_agent_with_scripted_user_on_retail(shared_data, tmp_path):
    data = shared_data / "taubench" / "retail"
    args = ["eval", "--env", "retail", "--data", str(data), "--split", "dev", "--agent", "replay"]
    result = CliRunner().invoke(app, [*args, "--user", "retail_scripted", "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["conversations"] == 20 and summary["average_reward"]["mean"] > 0.9
