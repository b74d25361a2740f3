# envhub: `make run` serves it, `make test` checks it. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# uv, from PyPI, installs the requirements in about a third of pip's time (bench/RESULTS.md); pip stays the
# fallback, and INSTALLER=pip uses pip alone.
INSTALLER ?= uv
UV_VERSION := 0.13.8
define install
	@if [ "$(INSTALLER)" = uv ] && $(PIP) install uv==$(UV_VERSION) && \
		$(BIN)/uv pip install --quiet --python $(BIN)/python -r $(1); then :; \
	else echo "installing $(1) with pip"; $(PIP) install -r $(1); fi
endef

.PHONY: run test test-all lint format clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "envhub needs Python 3.11 or newer; set PYTHON=python3.11 (or newer)"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
		echo "could not create $(VENV): on Debian/Ubuntu install the venv module with 'sudo apt install python3-venv'"; exit 1; }

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(call install,requirements.txt)
	@touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(call install,requirements-dev.txt)
	@touch $@

HOST ?= 127.0.0.1
PORT ?= 7860

run: $(VENV)/.runtime
	@mkdir -p data
	ENVHUB_ALLOW_PRIVATE_URLS=$${ENVHUB_ALLOW_PRIVATE_URLS:-true} $(BIN)/python -m app serve --host $(HOST) --port $(PORT)

test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	# Test files run in parallel, a file to a worker: most tests wait on servers they start. Tests marked slow
	# (long scenarios and matrix cells whose path a default test walks too) run with `make test-all`.
	# The slowest tests are listed at the end: the place to look when the run grows.
	HF_HUB_DISABLE_TELEMETRY=1 $(BIN)/python -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile -m "not slow" \
		--durations=25

test-all: $(VENV)/.dev
	HF_HUB_DISABLE_TELEMETRY=1 $(BIN)/python -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile

format: $(VENV)/.dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
