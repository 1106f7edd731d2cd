"""``josh serve``'s model folders: adapters merged once, the tool-call parser for josh's ChatML template, and
folders josh did not write left alone. The server itself runs in ``tests/cli/test_serve_real.py`` (slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import CHATML_TOOL_CALLS, MARKER, serve_command, served_folder
from josh.llm.models import chatml_template


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("JOSH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def model_folder(path: Path, template: str) -> Path:
    """A stand-in model folder: weights, config, tokenizer config and a chat template."""
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights")
    (path / "config.json").write_text("{}")
    (path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (path / "chat_template.jinja").write_text(template)
    return path


def test_tool_calls_folder_links_the_weights_and_adds_the_parser(tmp_path, cache) -> None:
    source = model_folder(tmp_path / "base", chatml_template())
    served = Path(served_folder(str(source), tool_calls=True))
    assert served != source and (served / "model.safetensors").is_symlink()
    assert (served / "model.safetensors").resolve() == (source / "model.safetensors").resolve()
    config = json.loads((served / "tokenizer_config.json").read_text())
    assert config["response_template"] == CHATML_TOOL_CALLS and config["eos_token"] == "<|im_end|>"
    assert "response_template" not in json.loads((source / "tokenizer_config.json").read_text())

    marker = (served / MARKER).stat().st_mtime_ns
    assert Path(served_folder(str(source), tool_calls=True)) == served
    assert (served / MARKER).stat().st_mtime_ns == marker, "an unchanged source is not linked again"
    os.utime(source / "model.safetensors", (1, 1))
    assert Path(served_folder(str(source), tool_calls=True)) == served
    assert json.loads((served / MARKER).read_text())["weights_mtime"] == 1, "new weights: the folder is rebuilt"


def test_without_tool_calls_a_folder_is_served_as_it_is(tmp_path, cache) -> None:
    source = model_folder(tmp_path / "base", chatml_template())
    assert served_folder(str(source)) == str(source)


def test_tool_calls_need_josh_chatml_template(tmp_path, cache) -> None:
    llama = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}{{ '<|eot_id|>' }}"
    source = model_folder(tmp_path / "llama", llama)
    with pytest.raises(ValueError, match="josh's ChatML template only"):
        served_folder(str(source), tool_calls=True)


def test_a_folder_josh_did_not_write_is_never_overwritten(tmp_path, cache) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "smollm2"}))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not written by josh serve"):
        served_folder(str(adapter), folder=mine)
    assert (mine / "notes.txt").read_text() == "keep me"


def test_serve_print_folder_and_command_line(tmp_path, cache) -> None:
    source = model_folder(tmp_path / "base", chatml_template())
    result = CliRunner().invoke(app, ["serve", "--model", str(source), "--tool-calls", "--print-folder"])
    assert result.exit_code == 0, result.output
    printed = Path(result.output.strip())
    assert json.loads((printed / "tokenizer_config.json").read_text())["response_template"] == CHATML_TOOL_CALLS
    command = serve_command(str(printed), "127.0.0.1", 8123, ["--device", "cpu"])
    assert command[-8:] == ["serve", str(printed), "--host", "127.0.0.1", "--port", "8123", "--device", "cpu"]


def test_serve_refuses_a_missing_model_folder(tmp_path, cache) -> None:
    result = CliRunner().invoke(app, ["serve", "--model", str(tmp_path / "nope"), "--print-folder"])
    assert result.exit_code == 2


NAMES = st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True)
VALUES = st.one_of(st.integers(-999, 999), st.booleans(), st.text(st.characters(codec="utf-8"), max_size=12))
ARGUMENTS = st.dictionaries(NAMES, VALUES, max_size=3)


@pytest.fixture(scope="module")
def tokenizer():
    """SmolLM2's tokenizer with josh's template (the folder ``josh serve`` serves for ``smollm2``)."""
    from transformers import AutoTokenizer

    from josh.llm.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("smollm2"))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.sampled_from(["", "Let me look that up."]), calls=st.lists(st.tuples(NAMES, ARGUMENTS), max_size=3))
def test_the_parser_reads_back_every_call_josh_template_writes(tokenizer, text, calls) -> None:
    message = {"role": "assistant", "content": text}
    message["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
    prompt = [{"role": "user", "content": "hi"}]
    before = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*prompt, message], tokenize=False)
    assert full.startswith(before)
    generated = full[len(before) :].removesuffix("\n")  # generation stops at the end-of-turn token
    ids = tokenizer(generated, add_special_tokens=False)["input_ids"]
    assume(tokenizer.decode(ids) == generated)  # a character SmolLM2's vocabulary lacks: no model can write it
    parsed = tokenizer.parse_response(ids, CHATML_TOOL_CALLS, prefix=before)
    assert parsed.get("content", "") == text
    got = [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.get("tool_calls", [])]
    assert got == calls


@pytest.mark.slow
def test_a_malformed_call_makes_the_parser_raise(tokenizer) -> None:
    """Why --tool-calls is off by default: transformers' server turns this error into HTTP 500."""
    prefix = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer('<tool_call>\n{"name": "find", "arguments": {"a": 1}\n</tool_call><|im_end|>')["input_ids"]
    with pytest.raises(ValueError, match="JSON"):
        tokenizer.parse_response(ids, CHATML_TOOL_CALLS, prefix=prefix)
