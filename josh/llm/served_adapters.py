"""LoRA adapters loaded at run time into a running vLLM server, which then serves each under its own name.

The server is started with LoRA on and runtime loading allowed::

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora --max-lora-rank R

``check`` finds the served base model (``GET /v1/models``: the entry whose name or folder is the base) and probes
``POST /v1/load_lora_adapter`` with a folder that does not exist: a server that answers "no adapter found" can load
adapters; one without the route refuses runtime loading, one whose engine has no LoRA says so; where the server
tells its ``--max-lora-rank`` (``/server_info``, in vLLM's dev mode), a larger rank is refused. ``load`` checks the
adapter's base (``adapter_config.json``'s ``base_model_name_or_path``) against the served base, loads it under a name
(skipped when the server already holds that name) and turns the server's refusals (a folder it cannot read, a rank
over its ``--max-lora-rank``) into one line naming the fix. Requests then name the adapter as their model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from josh.llm.models import resolve_model

RUNTIME_LOADING = "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
PROBE_NAME = "josh-probe"
PROBE_PATH = "/nonexistent/josh-probe-adapter"
RANK = re.compile(r"LoRA rank (\d+) is greater than max_lora_rank (\d+)")


class ServedAdapterError(ValueError):
    """The server cannot serve the loop's adapters; the message names the fix."""


def same_model(a: str, b: str) -> bool:
    """Whether two model references name the same model: equal, or the same local folder once resolved."""
    if a == b:
        return True
    try:
        return Path(resolve_model(a)).resolve() == Path(resolve_model(b)).resolve()
    except (OSError, ValueError):
        return False


def _message(response: httpx.Response) -> str:
    """The error text of a server's answer: vLLM's ``{"error": {"message"}}``, FastAPI's ``detail``, or the body."""
    try:
        body: Any = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if body.get("detail"):
            return str(body["detail"])
    return json.dumps(body)[:300]


class ServedAdapters:
    """A client of one vLLM server's runtime adapter loading; see the module docstring."""

    def __init__(self, base_url: str, *, api_key: str = "EMPTY", timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.timeout_s = timeout_s

    def _request(self, method: str, route: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            return httpx.request(
                method, f"{self.base_url}/{route}", json=body, headers=self.headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as error:
            raise ServedAdapterError(
                f"cannot reach the server at {self.base_url} ({type(error).__name__}: {error}); start it with "
                f"{RUNTIME_LOADING} vllm serve BASE --enable-lora"
            ) from None

    def models(self) -> list[dict[str, Any]]:
        """The server's model cards (``GET /v1/models``): the base models and the adapters it holds."""
        response = self._request("GET", "models")
        if response.status_code != 200:
            raise ServedAdapterError(f"{self.base_url}/models answered {response.status_code}: {_message(response)}")
        data = response.json().get("data")
        return data if isinstance(data, list) else []

    def base_name(self, model: str) -> str:
        """The name the server serves the base model ``model`` under (its own name, or that of its folder)."""
        bases = [card for card in self.models() if not card.get("parent")]
        for card in bases:
            if same_model(str(card.get("id")), model) or same_model(str(card.get("root") or ""), model):
                return str(card["id"])
        served = ", ".join(str(card.get("id")) for card in bases) or "nothing"
        raise ServedAdapterError(
            f"the server at {self.base_url} serves {served}, not the base model {model}: start it with "
            f"vllm serve {model} --enable-lora"
        )

    def check(self, model: str, rank: int | None = None) -> str:
        """The served name of base ``model`` once the server is seen to load adapters at run time (see the module
        docstring); ``rank`` is the adapters' LoRA rank, named in the fix for a server without LoRA."""
        base = self.base_name(model)
        response = self._request("POST", "load_lora_adapter", {"lora_name": PROBE_NAME, "lora_path": PROBE_PATH})
        message = _message(response)
        if response.status_code in (404, 405) and "No adapter found" not in message:
            raise ServedAdapterError(
                f"the server at {self.base_url} does not load adapters at run time ({response.status_code} "
                f"{message}): restart it with {RUNTIME_LOADING} in its environment"
            )
        if "LoRA is not enabled" in message or "enable-lora" in message or "no LoRA support" in message:
            flag = f" --max-lora-rank {rank}" if rank else ""
            raise ServedAdapterError(
                f"the server at {self.base_url} serves {base} without LoRA: restart it with "
                f"{RUNTIME_LOADING} vllm serve {model} --enable-lora{flag}"
            )
        if response.status_code >= 500 or response.status_code in (401, 403):
            raise ServedAdapterError(f"the server at {self.base_url} refused a test load: {message}")
        most = self.max_lora_rank()
        if rank is not None and most is not None and rank > most:
            raise ServedAdapterError(
                f"the loop trains adapters of LoRA rank {rank}, over the server's --max-lora-rank {most}: restart "
                f"vllm serve with --max-lora-rank {rank} (or train with lora.r <= {most})"
            )
        return base

    def max_lora_rank(self) -> int | None:
        """The server's ``--max-lora-rank`` where it says (``GET /server_info``, which vLLM serves only with
        ``VLLM_SERVER_DEV_MODE=1``); ``None`` where it does not."""
        root = self.base_url.removesuffix("/v1")
        try:
            response = httpx.get(f"{root}/server_info", params={"config_format": "json"}, headers=self.headers,
                                 timeout=self.timeout_s)  # fmt: skip
            lora = response.json()["vllm_config"]["lora_config"] if response.status_code == 200 else None
            return int(lora["max_lora_rank"]) if isinstance(lora, dict) else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None

    def load(self, adapter: Path, name: str, base: str) -> str:
        """Load the adapter folder ``adapter`` as ``name`` into the server serving ``base``; returns ``name``."""
        config = adapter / "adapter_config.json"
        if not config.is_file():
            raise ServedAdapterError(f"{adapter} is not a LoRA adapter folder (no adapter_config.json)")
        trained_on = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path") or ""
        if not same_model(trained_on, base):
            raise ServedAdapterError(
                f"{adapter} is an adapter of {trained_on}, but the server serves {base}: serve {trained_on}, or "
                "train on the served base"
            )
        path = str(adapter.resolve())
        if any(card.get("id") == name and card.get("root") == path for card in self.models()):
            return name
        response = self._request("POST", "load_lora_adapter", {"lora_name": name, "lora_path": path})
        if response.status_code == 200:
            return name
        message = _message(response)
        if rank := RANK.search(message):
            raise ServedAdapterError(
                f"{adapter} has LoRA rank {rank[1]}, over the server's --max-lora-rank {rank[2]}: restart "
                f"vllm serve with --max-lora-rank {rank[1]} (or train with lora.r <= {rank[2]})"
            )
        if "No adapter found" in message:
            raise ServedAdapterError(
                f"the server at {self.base_url} cannot read {path}: put the run folder where the server sees it "
                "under the same path (a shared file system), or run the server on this machine"
            )
        raise ServedAdapterError(f"the server at {self.base_url} could not load {path}: {message}")
