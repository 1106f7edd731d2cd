"""The Python API: ``import josh`` loads nothing else, and docs/python.md's quickstart runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import josh

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python.md"


def test_importing_josh_loads_no_layer_until_a_function_is_used() -> None:
    code = (
        "import sys, josh; loaded = sorted(m for m in sys.modules if m.startswith('josh.') and m != 'josh.version'"
        " and not m.startswith('josh.util')); heavy = [m for m in ('torch', 'transformers', 'pydantic') if m in"
        " sys.modules]; print(loaded, heavy); env = josh.make_env('toolwoz', data='mini'); print('josh.api' in"
        " sys.modules, len(env.tasks('test')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.splitlines() == ["[] []", "True 50"]


def test_every_api_name_is_documented_on_the_page() -> None:
    text = PAGE.read_text()
    for name in josh.__all__[1:]:
        assert f"`josh.{name}(" in text, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        josh.nope  # noqa: B018


def test_builders_refuse_a_bad_option_as_the_command_line_does() -> None:
    env = josh.make_env("toolwoz", data="mini")
    with pytest.raises(ValueError, match="did you mean 'max_generations'"):
        josh.make_agent("react", env, josh.make_llm("scripted", replies=["hi"]), max_generatoins=2)
    with pytest.raises(ValueError, match="unknown user simulator 'agneda' .*did you mean 'agenda'"):
        josh.make_user("agneda", env)
    with pytest.raises(ValueError, match="unknown option patiense for the agenda user"):
        josh.make_user("agenda", env, patiense=3)


@pytest.mark.slow  # trains SmolLM2 one step and evaluates it
def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    script = tmp_path / "quickstart.py"
    script.write_text(block)
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rewards: [1.0, 1.0]" in done.stdout
    assert re.search(r"average reward: [0-9.]+ over 1 conversations", done.stdout)
    assert (tmp_path / "runs" / "quickstart-sft" / "adapter_config.json").is_file()


def test_extract_frames_a_scripted_agents_rows_for_the_agent_to_train() -> None:
    env = josh.make_env("toolwoz", data="mini")
    user, task = josh.make_user("agenda", env), env.tasks("train")[0]
    tree = josh.search_task(env, task, josh.make_agent("oracle", env), user, max_beam=2, max_depth=6)
    with pytest.raises(ValueError, match="record no system prompt: pass agent="):
        josh.extract([tree])
    framed = josh.extract([tree], agent="function_calling", env=env).rows.sft[0]["messages"][0]
    evaluated = josh.make_agent("function_calling", env, josh.make_llm("scripted", replies=["hi"])).frame(task).system
    assert framed == {"role": "system", "content": evaluated}
    assert josh.extract([tree], agent="recorded").rows.sft[0]["messages"][0]["role"] != "system"
