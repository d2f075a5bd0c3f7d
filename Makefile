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

demo: $(STAMP)
	$(BIN)/gpucluster catalog
	$(BIN)/gpucluster topology --cluster examples/h200-256-ndr400.yaml
	$(BIN)/gpucluster comm --cluster examples/h200-256-ndr400.yaml --op all_reduce --gpus 64 --max 8G
	$(BIN)/gpucluster validate ../shared/validation/collective-public.yaml

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/collective_accuracy.py

clean:
	rm -rf $(VENV) build src/*.egg-info
