"""A stand-in for ``vllm serve BASE --enable-lora`` on 127.0.0.1: ``GET /v1/models`` and ``POST
/v1/load_lora_adapter`` answer as vLLM 0.32 does, for each way a server can be set up. ``runtime_loading=False``: the
route is missing (FastAPI's 404 ``{"detail": "Not Found"}``); ``lora=False``: the engine's "LoRA is not enabled"
(500); an adapter over ``max_rank`` gets the rank error (500); a folder without ``adapter_config.json`` gets "No adapter
found" (404), as does every folder with ``readable=False`` (a server on another machine); ``dev_mode=True`` serves
``GET /server_info`` with the LoRA config, as ``VLLM_SERVER_DEV_MODE=1`` does. ``loaded`` holds the adapters loaded, by name."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class LoraServer:
    """See the module docstring; a context manager that stops the server on exit."""

    def __init__(self, base: str, *, root: str | None = None, runtime_loading: bool = True, lora: bool = True,
                 max_rank: int = 16, readable: bool = True, dev_mode: bool = False) -> None:  # fmt: skip
        self.base, self.root, self.readable, self.dev_mode = base, root or base, readable, dev_mode
        self.runtime_loading, self.lora, self.max_rank = runtime_loading, lora, max_rank
        self.loaded: dict[str, str] = {}
        self.requests: list[str] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def __enter__(self) -> LoraServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def models(self) -> dict[str, Any]:
        cards = [{"id": self.base, "root": self.root, "parent": None}]
        cards += [{"id": name, "root": path, "parent": self.base} for name, path in self.loaded.items()]
        return {"object": "list", "data": cards}

    def load(self, body: dict[str, Any]) -> tuple[int, Any]:
        if not self.runtime_loading:
            return 404, {"detail": "Not Found"}
        name, path = body["lora_name"], body["lora_path"]
        if not self.lora:
            return 500, _error("LoRA is not enabled. Use --enable-lora to enable LoRA.", 500)
        config = Path(path) / "adapter_config.json"
        if not config.is_file() or not self.readable:
            return 404, _error(f"Loading lora {name} failed: No adapter found for {path}", 404)
        rank = json.loads(config.read_text())["r"]
        if rank > self.max_rank:
            return 500, _error(f"LoRA rank {rank} is greater than max_lora_rank {self.max_rank}.", 500)
        if name in self.loaded:
            return 400, _error(f"The lora adapter '{name}' has already been loaded.", 400)
        self.loaded[name] = path
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(f"GET {self.path}")
                if self.path == "/v1/models":
                    return self._send(200, server.models())
                if self.path.startswith("/server_info") and server.dev_mode:
                    lora = {"max_lora_rank": server.max_rank} if server.lora else None
                    return self._send(200, {"vllm_config": {"lora_config": lora}})
                self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(f"POST {self.path} {body.get('lora_name')}")
                if self.path != "/v1/load_lora_adapter":
                    return self._send(404, {"detail": "Not Found"})
                self._send(*server.load(body))

            def _send(self, status: int, body: Any) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _error(message: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": code}}


def adapter(folder: Path, base: str, rank: int = 8) -> Path:
    """A LoRA adapter folder as ``josh train`` leaves it, as far as a server checks it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": rank}))
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder
