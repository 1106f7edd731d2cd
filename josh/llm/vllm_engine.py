"""One vLLM asynchronous engine (``AsyncLLM``) owned by josh: its own event loop thread, continuous batching, shutdown.

vLLM's async engine schedules every request on its own: a request joins the running batch at the next engine step
and leaves it when it finishes, so a short reply never waits for a long one (the synchronous ``LLM.generate`` waits
for its whole batch). The engine lives on a private event loop in a daemon thread, so callers may come from any
event loop or thread (``josh`` runs one ``asyncio.run`` per stage); a caller awaits a future bridged from that loop.
Cancelling the caller cancels the request inside the engine. ``shutdown`` stops the engine's processes (on a GPU it
frees the device memory for the next engine in the same process) and the thread.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import multiprocessing
import shutil
import sys
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from josh.llm.batcher import Batcher

T = TypeVar("T")
PROCESS_EXIT_S = 30.0
"""How long ``shutdown`` waits for each of the engine's processes to end once vLLM's own shutdown has returned."""


class EngineDead(RuntimeError):
    """The engine's processes are gone: every later request fails at once with this."""


class AsyncEngine:
    """An ``AsyncLLM`` started from engine arguments on a private event loop; see the module docstring."""

    def __init__(self, engine_args: dict[str, Any], *, zero_lora_for_base: bool = False) -> None:
        self.args = engine_args
        self._adapters: dict[str, Any] = {}
        self._zero_lora_for_base = zero_lora_for_base
        self._zero_folder: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="josh-vllm-engine", daemon=True)
        self._thread.start()
        self._ids = itertools.count()
        self.dead: str | None = None
        earlier = {p.pid for p in _descendants()}
        try:
            self.engine = self._run(self._start(engine_args))
        except BaseException:
            self._stop_loop()
            raise
        self._processes = _engine_processes(earlier)
        self.tokenizer = self.engine.get_tokenizer()
        self.max_model_len: int = self.engine.model_config.max_model_len

    async def _start(self, engine_args: dict[str, Any]) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs  # optional: the vllm extra
        from vllm.v1.engine.async_llm import AsyncLLM  # optional: the vllm extra

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args))

    def lora_request(self, adapter: str | None) -> Any:
        """The ``LoRARequest`` of an adapter folder (one stable integer id per folder), None for the base model.

        With ``zero_lora_for_base`` (vLLM's CPU build), once an adapter is in use the base model is served through an
        all-zero copy of it: the CPU LoRA kernels index the adapter slots with the base model's -1, which picks the
        last slot, so a base request batched with adapter requests would get another request's adapter."""
        if adapter is None:
            if not (self._zero_lora_for_base and self._adapters):
                return None
            adapter = self._zero_adapter()
        if adapter not in self._adapters:
            from vllm.lora.request import LoRARequest  # optional: the vllm extra

            number = len(self._adapters) + 1
            self._adapters[adapter] = LoRARequest(f"adapter-{number}", number, adapter)
        return self._adapters[adapter]

    def _zero_adapter(self) -> str:
        """An adapter folder shaped as the first one served, its weights all zero (adds exactly nothing)."""
        if self._zero_folder is None:
            from safetensors.torch import load_file, save_file  # optional: the train extra

            source = Path(next(iter(self._adapters)))
            folder = Path(tempfile.mkdtemp(prefix="josh-zero-lora-"))
            shutil.copy(source / "adapter_config.json", folder / "adapter_config.json")
            weights = load_file(source / "adapter_model.safetensors")
            save_file({name: tensor.zero_() for name, tensor in weights.items()}, folder / "adapter_model.safetensors")
            self._zero_folder = str(folder)
        return self._zero_folder

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the engine's loop and wait for it from this (non-engine) thread."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    async def generate(self, prompt_ids: list[int], params: Any, lora: Any = None) -> Any:
        """The final ``RequestOutput`` of one request (``params.n`` samples); raises what the engine raised for it."""
        if self.dead is not None:
            raise EngineDead(self.dead)
        future = asyncio.run_coroutine_threadsafe(self._generate(prompt_ids, params, lora), self._loop)
        try:
            return await asyncio.wrap_future(future)
        except Exception as exc:
            if getattr(getattr(self, "engine", None), "errored", False) and self.dead is None:
                self.dead = f"the vLLM engine died: {type(exc).__name__}: {exc}"
            raise

    async def _generate(self, prompt_ids: list[int], params: Any, lora: Any) -> Any:
        final = None
        request = {"prompt_token_ids": prompt_ids}
        async for output in self.engine.generate(request, params, f"josh-{next(self._ids)}", lora_request=lora):
            final = output
        return final

    def shutdown(self) -> None:
        """Stop the engine's processes and the loop thread, and release the memory they held (idempotent)."""
        if not self._thread.is_alive():
            return
        self.dead = self.dead or "the vLLM engine was shut down"
        engine = self.__dict__.pop("engine", None)
        if engine is not None:
            self._run(self._cancel_requests())
            engine.shutdown()
        del engine
        self._stop_loop()
        if self._zero_folder is not None:
            shutil.rmtree(self._zero_folder, ignore_errors=True)
        _await_exit(self._processes)
        _release_device_memory()

    async def _cancel_requests(self) -> None:
        """Cancel the requests still in flight (their callers get ``CancelledError``), so none outlives the engine."""
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _descendants() -> list[Any]:
    """This process's child processes and theirs (``psutil`` is vLLM's own dependency)."""
    import psutil  # optional: the vllm extra

    return psutil.Process().children(recursive=True)


def _engine_processes(earlier: set[int]) -> list[Any]:
    """The processes an engine's start created (pids not in ``earlier``): the ``multiprocessing`` children it started
    (its engine core) and their descendants (its workers). Not the helpers that live as long as this process which
    that start may have launched, such as ``multiprocessing``'s resource tracker (the first spawn starts it): they
    never end with the engine, and waiting for one would always run out ``PROCESS_EXIT_S``."""
    import psutil  # optional: the vllm extra

    started = {child.pid for child in multiprocessing.active_children()} - earlier
    roots = [child for child in psutil.Process().children() if child.pid in started]
    return [process for root in roots for process in (root, *root.children(recursive=True))]


def _await_exit(processes: list[Any], timeout_s: float = PROCESS_EXIT_S) -> None:
    """Wait until the engine's processes have ended. vLLM's shutdown signals them, waits 5 s, then kills what is left
    without waiting: on a loaded machine its engine core and workers are still running when it returns. This process's
    own children are joined through ``multiprocessing`` (which reaps them; listing them reaps those already ended),
    the others polled until they are gone."""
    import psutil  # optional: the vllm extra

    children = {child.pid: child for child in multiprocessing.active_children()}
    for process in processes:
        if process.pid in children:
            children[process.pid].join(timeout_s)
    psutil.wait_procs([p for p in processes if p.pid not in children], timeout=timeout_s)


def _release_device_memory() -> None:
    """Collect the engine's garbage and return cached GPU memory to the device, so a later engine in this process can
    claim it. Without CUDA there is no device memory to return: the full collection (a pass over every object of the
    process, half a second in a large one) is skipped, and so is importing torch where vLLM never did."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


class BatchedEngine:
    """A synchronous ``vllm.LLM`` served like ``AsyncEngine``: concurrent requests gathered into one blocking
    ``LLM.generate`` on a worker thread (``josh.llm.batcher``). For an engine that is not josh's to start, such as
    TRL's colocated one in GRPO; a batch runs until its longest member ends, and a request the engine rejects fails
    its whole batch. ``owned``: ``shutdown`` also stops the engine."""

    def __init__(self, llm: Any, *, max_batch_size: int, window_s: float = 0.01, owned: bool = False) -> None:
        self.llm, self._owned, self.dead = llm, owned, None
        self.args = {"model": llm.llm_engine.model_config.model, "enable_lora": False, "max_num_seqs": max_batch_size}
        self.tokenizer = llm.get_tokenizer()
        self.max_model_len: int = llm.llm_engine.model_config.max_model_len
        self.batcher = Batcher(self._run, max_batch_size=max_batch_size, window_s=window_s,
                               weight=lambda request: request[1].n, name="josh-vllm-generate")  # fmt: skip

    def lora_request(self, adapter: str | None) -> None:
        return None

    async def generate(self, prompt_ids: list[int], params: Any, lora: Any = None) -> Any:
        return await self.batcher.submit((prompt_ids, params))

    def _run(self, requests: list[tuple[list[int], Any]]) -> list[Any]:
        prompts = [{"prompt_token_ids": ids} for ids, _ in requests]
        return self.llm.generate(prompts, sampling_params=[params for _, params in requests], use_tqdm=False)

    def shutdown(self) -> None:
        """Stop the batching thread (and the engine, when it is ours)."""
        self.batcher.close()
        if self._owned:
            self.llm.llm_engine.engine_core.shutdown()
