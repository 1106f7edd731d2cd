"""Serve a josh model over HTTP with transformers' OpenAI-compatible server (``transformers serve``, CPU or GPU).

``served_folder`` turns what josh calls a model into a folder the server loads: the offline ``smollm2`` becomes its
cached safetensors folder, and a ``josh train`` adapter is merged into its base once (cached under
``$JOSH_CACHE/served``, redone when the adapter changes). With ``tool_calls=True`` the folder's tokenizer also gets a
response template for josh's ChatML tool format, so the server answers ``<tool_call>{...}</tool_call>`` blocks as
native ``tool_calls``; transformers 5.23 answers HTTP 500 when a model writes a malformed block, so the default
leaves the calls in the text, where josh's agents read them exactly as from the ``hf`` backend.

``ModelServer`` runs the server as a child process on a loopback port and waits until it answers; the
``josh serve`` command runs it in the foreground.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import typer

from josh.llm.models import cache_root, is_adapter_dir, resolve_model
from josh.util.atomic import write_atomic, write_folder_atomic
from josh.util.errors import reported
from josh.util.layout import SERVED_MARKER as MARKER

INSTALL_HINT = "transformers serve needs its serving extra: pip install 'josh-agents[serve]'"

TOKENIZER_CONFIG = "tokenizer_config.json"

# How josh's ChatML template (josh/llm/templates/chatml_tools.jinja) writes tool calls, for the server's parser.
CHATML_TOOL_CALLS: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*<\|im_end\|>", "content": "text"},
    },
}


def served_folder(model: str, *, tool_calls: bool = False, folder: str | Path | None = None) -> str:
    """What ``transformers serve`` should load for ``model``: a local folder, or a hub id as given (see above)."""
    path = resolve_model(model)
    if Path(path).is_dir():
        path = str(Path(path).absolute())  # the server answers to exactly this name
    if is_adapter_dir(path):
        path = str(_merged(Path(path), Path(folder) if folder and not tool_calls else None))
    if not tool_calls:
        return path
    if not Path(path).is_dir():
        raise ValueError(f"--tool-calls needs a local model folder; {model!r} is not one")
    return str(_with_tool_parser(Path(path), Path(folder) if folder else None))


def _merged(adapter: Path, folder: Path | None) -> Path:
    """The adapter merged into its base, reused while the adapter's weights are unchanged."""
    stamp = {"source": str(adapter.resolve()), "weights_mtime": _weights_mtime(adapter)}
    target = folder or cache_root() / "served" / f"{adapter.resolve().name}-{_key(adapter)}"
    if _stamp(target) == stamp:
        return target
    _check_writable(target)
    from josh.llm.merge import merge_adapter  # heavy: the training stage

    return _build(target, stamp, lambda tmp: merge_adapter(adapter, tmp))


def _with_tool_parser(source: Path, folder: Path | None) -> Path:
    """``source`` with a tokenizer that parses josh's tool calls: its files linked, the tokenizer config rewritten."""
    template = _chat_template(source)
    if "<tool_call>" not in template or "<|im_start|>assistant" not in template:
        raise ValueError(
            f"{source}: --tool-calls knows the tool-call format of josh's ChatML template only, and this model's chat "
            "template is another; serve it without --tool-calls (josh's agents read calls from the text)"
        )
    stamp = {"source": str(source.resolve()), "tool_calls": True, "weights_mtime": _weights_mtime(source)}
    target = folder or cache_root() / "served" / f"{source.resolve().name}-{_key(source)}-tools"
    if _stamp(target) == stamp:
        return target

    def link(tmp: Path) -> None:
        for item in source.iterdir():
            if item.name not in (TOKENIZER_CONFIG, MARKER):
                (tmp / item.name).symlink_to(item.resolve())
        config = json.loads((source / TOKENIZER_CONFIG).read_text())
        config["response_template"] = CHATML_TOOL_CALLS
        write_atomic(tmp / TOKENIZER_CONFIG, json.dumps(config, indent=2))

    _check_writable(target)
    return _build(target, stamp, link)


def _key(source: Path) -> str:
    """A short name for a source folder: its cached copy is rebuilt in place when the source changes."""
    return hashlib.sha1(str(source.resolve()).encode()).hexdigest()[:10]


def _chat_template(folder: Path) -> str:
    file = folder / "chat_template.jinja"
    if file.is_file():
        return file.read_text(encoding="utf-8")
    config = folder / TOKENIZER_CONFIG
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    return template if isinstance(template, str) else ""


def _weights_mtime(folder: Path) -> float:
    return max((p.stat().st_mtime for p in folder.glob("*.safetensors")), default=0.0)


def _stamp(folder: Path) -> dict[str, Any] | None:
    marker = folder / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else None


def _check_writable(target: Path) -> None:
    """Never overwrite a folder that josh did not write."""
    if target.exists() and any(target.iterdir()) and _stamp(target) is None:
        raise ValueError(f"{target} exists and was not written by josh serve; choose another --folder")


def _build(target: Path, stamp: dict[str, Any], fill: Callable[[Path], object]) -> Path:
    """Fill ``target`` afresh, stamped as josh serve's, in one swap."""

    def stamped(folder: Path) -> None:
        fill(folder)
        write_atomic(folder / MARKER, json.dumps(stamp))

    return write_folder_atomic(target, stamped)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_installed() -> None:
    """Raise ``ImportError`` naming the extra when the server's packages are missing."""
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"{INSTALL_HINT} ({', '.join(missing)} missing)")


def serve_command(model: str, host: str, port: int, options: list[str] | None = None) -> list[str]:
    """The ``transformers serve`` command line that serves the folder ``model`` alone."""
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", model, "--host", host]
    return [*command, "--port", str(port), *(options or [])]


def server_env() -> dict[str, str]:
    """The server's environment: no update check against PyPI, quiet tokenizers, and idle OpenMP threads that sleep
    rather than spin (see ``josh.cli.main``: on a shared CPU, spinning threads slow generation several times)."""
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
    return {**env, "HF_HUB_DISABLE_UPDATE_CHECK": "1", "TOKENIZERS_PARALLELISM": "false"}


class ModelServer:
    """An OpenAI-compatible server in a child process on a loopback port (``transformers serve`` of ``model``, or
    ``command`` given whole with ``{port}`` in it, e.g. ``vllm serve``); a context manager that stops it on exit."""

    def __init__(
        self,
        model: str,
        *,
        port: int | None = None,
        options: list[str] | None = None,
        log: str | Path | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.model = model
        self.command = command
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.options = options or []
        self.log_path = Path(log) if log else None
        self.process: subprocess.Popen | None = None
        self._log: IO[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self, timeout_s: float = 300.0) -> ModelServer:
        """Start the server and return once it answers (it loads the model before it listens)."""
        if self.command is None:
            check_installed()
            command = serve_command(self.model, self.host, self.port, self.options)
        else:
            command = [part.replace("{port}", str(self.port)) for part in self.command]
        self._log = self.log_path.open("a", encoding="utf-8") if self.log_path else None
        sink = self._log or subprocess.DEVNULL
        self.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=server_env())
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        import openai  # heavy: openai

        client = openai.OpenAI(api_key="EMPTY", base_url=self.base_url, timeout=5.0, max_retries=0)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"the server exited with code {self.process.returncode}{self._tail()}")
                try:
                    client.models.list()
                    return
                except openai.APIStatusError:  # an answer: listening (its /v1/models lists the hub cache only)
                    return
                except (openai.APIConnectionError, openai.APITimeoutError):
                    time.sleep(0.1)
        finally:
            client.close()
        raise TimeoutError(f"the server did not answer within {timeout_s:.0f} s{self._tail()}")

    def _tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return (": " + " | ".join(lines[-3:])) if lines else ""

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ModelServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    model: str = typer.Option("smollm2", help="smollm2, a model folder, or a josh train adapter folder (merged)"),
    host: str = typer.Option("127.0.0.1", help="address to listen on (0.0.0.0 for other machines)"),
    port: int = typer.Option(8000, min=1, max=65535, help="port to listen on"),
    tool_calls: bool = typer.Option(
        False, help="answer <tool_call> blocks as native tool_calls (josh's ChatML models; malformed ones get HTTP 500)"
    ),
    folder: Path | None = typer.Option(None, help="where a merged adapter is written (default: under $JOSH_CACHE)"),
    device: str = typer.Option("auto", help="torch device: auto, cpu, cuda:0, ..."),
    dtype: str = typer.Option("auto", help="weights dtype: auto (as stored), bfloat16, float16, float32"),
    continuous_batching: bool = typer.Option(False, help="transformers' continuous batching (paged attention)"),
    print_folder: bool = typer.Option(False, help="only prepare the model folder and print its path (for vllm serve)"),
) -> None:
    """Serve a model behind an OpenAI-compatible endpoint (transformers serve) for --backend openai."""
    with reported():
        if not print_folder:
            check_installed()  # before the folder is prepared: converting or merging a model takes a while
        served = served_folder(model, tool_calls=tool_calls, folder=folder)
        if print_folder:
            typer.echo(served)
            return
    options = ["--device", device, "--dtype", dtype]
    options += ["--continuous-batching"] if continuous_batching else []
    url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}/v1"
    typer.echo(f"serving {served} at {url} (transformers serve; Ctrl-C stops it)")
    typer.echo(f"use it with: --backend openai --base-url {url} --model {served}")
    try:
        code = subprocess.run(serve_command(served, host, port, options), env=server_env()).returncode
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)
