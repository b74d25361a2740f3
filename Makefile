# envhub: `make run` serves it, `make test` checks it. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test lint format clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "envhub needs Python 3.11 or newer; set PYTHON=python3.11 (or newer)"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
		echo "could not create $(VENV): on Debian/Ubuntu install the venv module with 'sudo apt install python3-venv'"; exit 1; }

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(PIP) install -r requirements.txt
	@touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(PIP) install -r requirements-dev.txt
	@touch $@

run: $(VENV)/.runtime
	@mkdir -p data
	ENVHUB_ALLOW_PRIVATE_URLS=$${ENVHUB_ALLOW_PRIVATE_URLS:-true} $(BIN)/python -m app serve

test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	# Test files run in parallel, a file to a worker: most tests wait on servers they start.
	HF_HUB_DISABLE_TELEMETRY=1 $(BIN)/python -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile

format: $(VENV)/.dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
