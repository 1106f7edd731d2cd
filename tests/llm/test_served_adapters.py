"""Runtime adapter loading into a vLLM server (``josh.llm.served_adapters``) against a stand-in server: each way the
server can be set up wrong is one line naming the fix; a good server loads an adapter once under its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.llm.served_adapters import RUNTIME_LOADING, ServedAdapterError, ServedAdapters
from tests.fakes.lora_server import LoraServer, adapter


def test_a_good_server_loads_an_adapter_once_under_its_name(tmp_path: Path) -> None:
    with LoraServer("base-model", root=str(tmp_path)) as server:
        client = ServedAdapters(server.url)
        assert client.check("base-model", 8) == "base-model"
        assert client.base_name(str(tmp_path)) == "base-model"  # the base named by its folder
        folder = adapter(tmp_path / "run" / "train-sft", "base-model")
        assert client.load(folder, "run/train-sft@1", "base-model") == "run/train-sft@1"
        assert client.load(folder, "run/train-sft@1", "base-model") == "run/train-sft@1"
        assert server.loaded == {"run/train-sft@1": str(folder.resolve())}
        assert sum(r.startswith("POST /v1/load_lora_adapter run/") for r in server.requests) == 1


@pytest.mark.parametrize(
    ("setup", "fix"),
    [
        ({"runtime_loading": False}, f"restart it with {RUNTIME_LOADING} in its environment"),
        ({"lora": False}, "vllm serve base-model --enable-lora --max-lora-rank 8"),
    ],
)
def test_a_server_that_cannot_load_adapters_is_refused_before_any_load(setup: dict, fix: str) -> None:
    with LoraServer("base-model", **setup) as server, pytest.raises(ServedAdapterError) as error:
        ServedAdapters(server.url).check("base-model", 8)
    assert fix in str(error.value) and "\n" not in str(error.value)


def test_a_server_of_another_base_is_refused() -> None:
    with LoraServer("other-model") as server, pytest.raises(ServedAdapterError, match="serves other-model, not"):
        ServedAdapters(server.url).check("base-model")


def test_a_server_that_is_down_is_one_line() -> None:
    with LoraServer("base-model") as server:
        url = server.url
    with pytest.raises(ServedAdapterError, match="cannot reach the server"):
        ServedAdapters(url, timeout_s=2).check("base-model")


def test_an_adapter_of_another_base_is_refused_before_the_server_sees_it(tmp_path: Path) -> None:
    with LoraServer("base-model") as server:
        folder = adapter(tmp_path / "a", "another-model")
        with pytest.raises(ServedAdapterError, match="adapter of another-model, but the server serves base-model"):
            ServedAdapters(server.url).load(folder, "a", "base-model")
    assert not any(r.startswith("POST") for r in server.requests)


def test_a_rank_over_the_servers_maximum_names_both(tmp_path: Path) -> None:
    with LoraServer("base-model", max_rank=16) as server, pytest.raises(ServedAdapterError) as error:
        ServedAdapters(server.url).load(adapter(tmp_path / "a", "base-model", rank=32), "a", "base-model")
    assert "rank 32, over the server's --max-lora-rank 16" in str(error.value)
    assert "--max-lora-rank 32" in str(error.value)


def test_a_folder_the_server_cannot_read_says_where_it_must_be(tmp_path: Path) -> None:
    with LoraServer("base-model", readable=False) as server, pytest.raises(ServedAdapterError, match="cannot read"):
        ServedAdapters(server.url).load(adapter(tmp_path / "a", "base-model"), "a", "base-model")


def test_a_rank_over_the_maximum_a_server_tells_is_refused_before_any_load() -> None:
    with LoraServer("base-model", max_rank=16, dev_mode=True) as server:
        assert ServedAdapters(server.url).check("base-model", 16) == "base-model"
        with pytest.raises(ServedAdapterError, match="rank 32, over the server's --max-lora-rank 16"):
            ServedAdapters(server.url).check("base-model", 32)
    with LoraServer("base-model", max_rank=16) as server:  # without dev mode the load tells
        assert ServedAdapters(server.url).check("base-model", 32) == "base-model"
