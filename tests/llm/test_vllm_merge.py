"""The vllm backend's ``merge_adapter``: when the adapter an engine starts with is folded into its base, and how that
engine is started, named and cleaned up (a fake ``vllm``; the real merge and engine are in ``test_vllm_real.py``)."""

import json
import os
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from josh.llm.config import VLLMConfig
from josh.llm.vllm import VLLMLLM, merge_dtype, merges
from tests.llm.test_vllm import FakeAsyncLLM, adapter, fake_vllm  # noqa: F401  (fake_vllm: a fixture)


@pytest.mark.parametrize(
    ("settings", "device", "merged"),
    [
        ({}, "cpu", True),  # vLLM's CPU LoRA is the slow path
        ({}, "cuda", False),  # a GPU keeps LoRA: fast, and one engine serves several adapters
        ({"enable_lora": True}, "cpu", False),  # asked for LoRA: views with other adapters stay possible
        ({"enable_lora": False}, "cpu", True),
        ({"merge_adapter": True}, "cuda", True),
        ({"merge_adapter": False}, "cpu", False),
        ({"engine_args": {"quantization": "bitsandbytes"}}, "cpu", False),  # LoRA on the quantized base, as trained
    ],
)
def test_when_the_starting_adapter_is_merged(settings, device, merged, tmp_path) -> None:
    assert merges(VLLMConfig(**settings), device, adapter(tmp_path), str(tmp_path)) is merged


def test_merging_refuses_lora_and_quantized_bases(tmp_path) -> None:
    with pytest.raises(ValidationError, match="merge_adapter=true serves the adapter folded into its base.*set one"):
        VLLMConfig(merge_adapter=True, enable_lora=True)
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "awq"}}))
    with pytest.raises(ValueError, match=r"needs a full-precision base, and .* is served quantized \(awq\)"):
        merges(VLLMConfig(merge_adapter=True), "cpu", adapter(tmp_path), str(tmp_path))
    assert not merges(VLLMConfig(), "cpu", str(tmp_path / "adapter"), str(tmp_path))


def test_the_merge_dtype_is_what_the_engine_serves() -> None:
    assert merge_dtype(VLLMConfig(), "cpu") == "float32"
    assert merge_dtype(VLLMConfig(), "cuda") == "auto"  # the base's own
    assert merge_dtype(VLLMConfig(dtype="bfloat16"), "cpu") == "bfloat16"


def fake_merge(calls: list) -> object:
    def merge_adapter(adapter, out, *, dtype, base):
        calls.append((adapter, base, dtype))
        (Path(out) / "config.json").write_text("{}")
        return Path(out)

    return merge_adapter


def test_a_merged_engine_serves_one_model_without_lora_and_removes_its_folder(fake_vllm, tmp_path, monkeypatch):  # noqa: F811
    import josh.llm.merge

    calls: list = []
    monkeypatch.setattr(josh.llm.merge, "merge_adapter", fake_merge(calls))
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cpu")
    first = adapter(tmp_path)
    llm = VLLMLLM(first)
    engine = FakeAsyncLLM.instances[-1].args
    folder = engine.model
    assert calls == [(first, str(tmp_path), "float32")]
    assert not engine.enable_lora and folder != str(tmp_path) and (Path(folder) / "config.json").is_file()
    assert llm.model == first and llm.adapter is None and llm.merged == first
    with pytest.raises(ValueError, match="serves the adapter .* merged into its base.*merge_adapter=false"):
        llm.with_adapter(None)
    llm.close()
    assert FakeAsyncLLM.instances[-1].stopped and not os.path.exists(folder)


def test_a_failed_start_leaves_no_merged_folder(fake_vllm, tmp_path, monkeypatch):  # noqa: F811
    import josh.llm.merge

    def broken(adapter, out, *, dtype, base):
        (Path(out) / "partial.safetensors").write_text("")
        raise OSError("disk full")

    monkeypatch.setattr(josh.llm.merge, "merge_adapter", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    fake_vllm["vllm.platforms"].current_platform = types.SimpleNamespace(device_type="cpu")
    with pytest.raises(OSError, match="disk full"):
        VLLMLLM(adapter(tmp_path))
    assert not list(tmp_path.glob("josh-merged-*")) and not FakeAsyncLLM.instances
