# Two entry points: `make demo` and `make test`. Both create .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

SHARED ?= ../shared

demo: $(STAMP)
	$(BIN)/gpucluster catalog --kind gpu
	$(BIN)/gpucluster topology --cluster examples/h200-256-ndr400.yaml
	$(BIN)/gpucluster comm --cluster examples/h200-256-ndr400.yaml --op all_reduce --gpus 64
	@echo "# the same 256 H200 behind one 100 GbE port per node (the seed's case study):"
	$(BIN)/gpucluster comm --cluster examples/h200-256-100gbe.yaml --op all_reduce --gpus 64 -b 1M -f 8
	@if [ -d $(SHARED)/validation ]; then $(BIN)/gpucluster validate $(SHARED)/validation/collective-public.yaml; fi

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python benchmarks/collective_accuracy.py
	$(BIN)/python benchmarks/collective_fit.py
	$(BIN)/python benchmarks/cli_startup.py

clean:
	rm -rf $(VENV) build src/*.egg-info
