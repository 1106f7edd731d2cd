import json

from typer.testing import CliRunner

from josh.cli.main import app


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


def test_llm_options_reach_the_agent_backend(tmp_path):
    reply = 'Action: {"name": "find_restaurant", "arguments": {"area": "centre"}}'
    args = [
        "eval",
        "--agent",
        "act",
        "--backend",
        "scripted",
        "--limit",
        "2",
        "--max-turns",
        "1",
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(
        app, [*args, "--llm-option", f"replies=[{json.dumps(reply)}, 'Which day would suit you?']", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    said = {m["content"] for line in lines for m in line["messages"] if m["role"] == "assistant"}
    assert len(lines) == 2 and reply in said, "the agent spoke the scripted replies given as an option"


def test_bad_llm_options_are_one_clear_error(tmp_path):
    base = ["eval", "--agent", "act", "--backend", "scripted", "--out", str(tmp_path)]
    unknown = CliRunner().invoke(app, [*base, "--llm-option", "wizardry=3"])
    assert unknown.exit_code == 2 and "wizardry" in unknown.output
    no_value = CliRunner().invoke(app, [*base, "--llm-option", "replies"])
    assert no_value.exit_code == 2 and "key=value" in no_value.output.lower()
    assert not (tmp_path / "results.jsonl").exists()
