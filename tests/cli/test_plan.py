"""``--plan`` on eval, rollout, train and loop: everything checked and resolved, what would run printed with at most
what it costs, nothing run or written; a plan fails where the run would, with the run's line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from josh.cli.main import app
from josh.core.llm import Sampling
from josh.run.components import ComponentOptions
from josh.run.plan import conversation_bound, turn_bound
from josh.util.plan import NOTHING_RUN

ROOT = Path(__file__).resolve().parents[2]
MINI = ["--env", "toolwoz", "--data", "mini"]


def josh(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})  # tables unwrapped
    return result.exit_code, result.output


def test_eval_plan_resolves_the_run_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    code, text = josh("eval", *MINI, "--agent", "react", "--user", "agenda", "--limit", "5", "--trials", "2",
                      "--max-turns", "4", "--out", out, "--plan")  # fmt: skip
    assert code == 0, text
    assert "train 200, val 30, test 50" in text and "5 of test" in text and NOTHING_RUN in text
    assert "smollm2-135m-instruct" in text  # the model folder the hf backend would load
    assert "120 (agent 120, user 0)" in text  # 10 conversations x 4 turns x 3 calls (react's max_generations)
    assert not out.exists()


def test_rollout_plan_counts_what_a_resume_leaves(tmp_path: Path) -> None:
    out = tmp_path / "rollout"
    code, text = josh("rollout", *MINI, "--agent", "oracle", "--user", "agenda", "--limit", "3", "--out", out)
    assert code == 0, text
    before = sorted((p.name, p.stat().st_mtime) for p in out.iterdir())
    code, text = josh("rollout", *MINI, "--agent", "oracle", "--user", "agenda", "--limit", "5", "--out", out, "--plan")
    assert code == 0, text
    assert "3 trees already done" in text and "2 to search" in text
    code, text = josh("rollout", *MINI, "--agent", "oracle", "--user", "agenda", "--limit", "2", "--out", out, "--plan")
    assert code == 0 and "2 trees already done" in text and "0 to search" in text  # only the planned tasks count
    assert sorted((p.name, p.stat().st_mtime) for p in out.iterdir()) == before


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--agent", "react", "--model", "/no/such/model"], "model folder /no/such/model does not exist"),
        (["--agent", "react", "--agent-option", "max_generatoins=2"], "did you mean 'max_generations'?"),
        (["--agent", "oracle", "--llm-option", "max_batch_sise=2"], "did you mean 'max_batch_size'?"),
    ],
)
def test_a_plan_fails_where_the_run_would_with_the_same_line(tmp_path: Path, args: list[str], line: str) -> None:
    planned = josh("eval", *MINI, *args, "--out", tmp_path / "a", "--limit", "1", "--plan")
    run = josh("eval", *MINI, *args, "--out", tmp_path / "b", "--limit", "1")
    assert planned[0] == run[0] == 2
    assert line in planned[1] and line in run[1]
    assert not (tmp_path / "a").exists()


def test_the_bound_counts_every_generation_and_user_reply() -> None:
    options = ComponentOptions(
        agent="react", agent_options={"max_generations": 2}, user="goal", agent_sampling=Sampling(max_new_tokens=10),
        user_sampling=Sampling(max_new_tokens=7),
    )  # fmt: skip
    turn = turn_bound(options)
    assert (turn.agent_calls, turn.user_calls, turn.tokens) == (2, 1, 2 * 10 + 7)
    conversation = conversation_bound(options, 3)
    assert (conversation.agent_calls, conversation.user_calls, conversation.tokens) == (6, 4, 3 * 27 + 7)


def test_loop_plan_prints_the_recipe_and_its_stages(tmp_path: Path) -> None:
    code, text = josh("loop", "-r", ROOT / "recipes" / "demo-cpu.yaml", "--set", f"output_dir={tmp_path}", "--plan")
    assert code == 0, text
    assert "name: demo-cpu" in text and "round 1 rollouts" in text and "eval round 1 JOSH-SFT" in text
    assert "7 of 7 stages run" in text and NOTHING_RUN in text
    assert not any(tmp_path.iterdir())


def test_loop_plan_refuses_a_misspelt_key(tmp_path: Path) -> None:
    recipe = yaml.safe_load((ROOT / "recipes" / "demo-cpu.yaml").read_text())
    recipe["rollout"]["search"] = {"max_bean": 4}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    code, text = josh("loop", "-r", path, "--plan")
    assert code == 2 and "unknown key 'rollout.search.max_bean': did you mean 'rollout.search.max_beam'?" in text


@pytest.mark.slow  # loads SmolLM2's tokenizer to measure the rows
def test_train_plan_counts_rows_steps_and_the_effective_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trees, rows = tmp_path / "trees", tmp_path / "rows"
    assert josh("rollout", *MINI, "--agent", "oracle", "--user", "agenda", "--limit", "3", "--out", trees)[0] == 0
    assert josh("extract", trees, "--out", rows, "--agent", "function_calling")[0] == 0
    out = tmp_path / "run"
    monkeypatch.setenv("WORLD_SIZE", "2")  # as under accelerate launch with two processes
    code, text = josh("train", "sft", "-r", ROOT / "recipes" / "tiny-sft.yaml", "--data", rows / "sft.jsonl",
                      "-o", out, "--plan")  # fmt: skip
    assert code == 0, text
    assert "3 rows within max_length" in text and "x 2 process(es)" in text and "optimizer steps" in text
    assert not out.exists()
