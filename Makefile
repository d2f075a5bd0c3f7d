# Two entry points: `make demo` and `make test`. Both create .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENGINES := $(VENV)/.engines

.PHONY: demo test test-fast install engines clean bench browser lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# torch (CPU build, on disk here), Ray, megatron-core and DeepSpeed (whose own config checks test
# the generated jobs) and the system packages the integration tests start
# (Slurm, MariaDB, iproute2; see .ci/engines.sh). Without them those tests skip with the reason.
$(ENGINES): $(STAMP) .ci/engines.sh
	bash .ci/engines.sh
	$(BIN)/pip install -q -e '.[test,torch,ray,frameworks]'
	touch $(ENGINES)

engines: $(ENGINES)

SHARED ?= ../shared
REPORTS ?= reports

demo: $(STAMP)
	@echo "### Plan: a 70B model on the 256 x H200 example cluster (8 x 400G InfiniBand per node)"
	@mkdir -p $(REPORTS)
	$(BIN)/gpucluster plan train --cluster examples/h200-256-ndr400.yaml --model llama3-70b --tokens 2T \
		--html $(REPORTS)/plan-llama3-70b-h200-256.html
	@echo "Open $(CURDIR)/$(REPORTS)/plan-llama3-70b-h200-256.html in a browser: the plan with its plots (no network needed)."
	@echo
	@echo "### The seed's case study: the same 256 H200 behind one 100 GbE port per node"
	$(BIN)/gpucluster plan train --cluster examples/h200-256-100gbe.yaml --model llama3-70b --tokens 2T --top 3
	@echo
	@echo "### What nccl-tests should print on the healthy cluster (all 256 GPUs)"
	$(BIN)/gpucluster comm --cluster examples/h200-256-ndr400.yaml --op all_reduce --gpus 256 -b 1M -f 4
	@if [ -d $(SHARED)/validation ]; then \
		echo; echo "### The model against published measurements"; \
		$(BIN)/gpucluster validate $(SHARED)/validation/collective-public.yaml $(SHARED)/validation/training-public.yaml; \
	fi

# Tiers (tests/conftest.py marks them by location; docs/performance.md): unit and in-process tests
# run on every core (pytest-xdist); integration (real Slurm, Ray, torch.distributed, netns, the
# console script in subprocesses) and browser tests share engines and ports, so they run one at a time.
# -rs: every skipped test prints its reason (a missing engine, no root), so CI says what it did not run.
IN_PROCESS := -m "not integration and not browser"
XDIST ?= -n auto

test: $(STAMP) browser $(ENGINES)
	$(BIN)/python -m pytest -rs $(IN_PROCESS) $(XDIST); fast=$$?; \
	$(BIN)/python -m pytest -rs -m "integration or browser"; slow=$$?; \
	exit $$(( fast || slow ))

# The unit and in-process tier alone, without its slow tests: no engines, no browser, under a
# minute of CPU.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -rs -m "not integration and not browser and not slow" $(XDIST)

# Static checks: ruff and mypy (pydantic plugin) over src/ tests/ benchmarks/, both at 0 errors
# (rules and reasons: docs/development.md). mypy keeps its cache in .mypy_cache, so a rerun is fast.
LINTED := $(VENV)/.lint
$(LINTED): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[test,lint]'
	touch $(LINTED)

lint: $(LINTED)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# Headless Chromium for the browser tests of the HTML reports, from Debian's packages; skipped
# when present, and when not root (the browser tests then skip and say why).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium and chromium-driver (Debian) for the browser tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
			>/dev/null) || echo "could not install chromium: the browser tests will skip"; \
	else echo "chromium/chromedriver missing (apt-get install chromium chromium-driver): browser tests will skip"; fi

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	-$(BIN)/python benchmarks/collective_accuracy.py
	-$(BIN)/python benchmarks/collective_fit.py
	-$(BIN)/python benchmarks/training_accuracy.py
	-$(BIN)/python benchmarks/cross_validate.py
	-$(BIN)/python benchmarks/training_speed.py
	-$(BIN)/python benchmarks/inference_accuracy.py
	-$(BIN)/python benchmarks/cli_startup.py

clean:
	rm -rf $(VENV) build src/*.egg-info $(REPORTS)
