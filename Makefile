# Entry points (see README): `make demo` runs the main job (`make try` keeps it running to try the CLI), `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps, so the demo installs only what the server runs: the runtime dependencies (RUNTIME),
# and on top of them the test and lint extras every check needs (DEV).
RUNTIME := $(VENV)/.runtime-stamp
DEV := $(VENV)/.dev-stamp

.PHONY: demo try test lint unit test-cluster kube-apiserver bench bench-smoke clean

$(RUNTIME): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME)

$(DEV): $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(DEV)

demo: $(RUNTIME)
	$(BIN)/python -m app serve --demo --port 0

try: $(RUNTIME)
	$(BIN)/python -m app serve --demo --keep-running --port 0

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Spread over the machine's cores by pytest-xdist (-n auto: one worker a core); a single test
# or folder run by hand stays in one process.
unit: $(DEV)
	$(BIN)/python -m pytest -n auto

test: lint unit

# The cluster suite (tests/cluster) against a real kube-apiserver + etcd: built once from
# Debian's kubernetes source package and cached in .cache/apiserver (see docs/operator-guide.md).
kube-apiserver:
	bash scripts/build-kube-apiserver.sh

test-cluster: $(DEV) kube-apiserver
	LONGSHOREMAN_CLUSTER_BACKENDS=real $(BIN)/python -m pytest tests/cluster

bench: $(DEV)
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_expressions.py
	$(BIN)/python bench/bench_regex.py
	$(BIN)/python bench/bench_git.py
	$(BIN)/python bench/bench_runner.py
	$(BIN)/python bench/bench_reaction.py
	$(BIN)/python bench/bench_scale.py
	$(BIN)/python bench/bench_verification.py
	$(BIN)/python bench/bench_github.py
	$(BIN)/python bench/bench_slack.py
	$(BIN)/python bench/bench_pages.py
	$(BIN)/python bench/bench_warehouses.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_idle.py
	$(BIN)/python bench/bench_stalls.py
	$(BIN)/python bench/bench_projects.py

# Every benchmark at a smoke size (a few runs, seconds each; CI runs this), so a behaviour
# change that breaks one fails here instead of leaving it to hang: each is bounded too
# (bench/limits.py), and a bench that stops moving ends with what it was waiting for.
SMOKE := LONGSHOREMAN_BENCH_LIMIT=60 $(BIN)/python
bench-smoke: $(DEV)
	$(SMOKE) bench/bench_engine.py
	$(SMOKE) bench/bench_expressions.py
	$(SMOKE) bench/bench_regex.py --runs 5
	$(SMOKE) bench/bench_git.py --runs 2 --files 20
	$(SMOKE) bench/bench_runner.py --pairs 1 --files 20
	$(SMOKE) bench/bench_reaction.py --runs 3
	$(SMOKE) bench/bench_scale.py --stages 5 --per-stage 2
	$(SMOKE) bench/bench_verification.py --runs 3
	$(SMOKE) bench/bench_github.py --seconds 1 --promotions 3 --polls 2
	$(SMOKE) bench/bench_slack.py --seconds 1 --update-seconds 1 --promotions 3
	$(SMOKE) bench/bench_pages.py --stages 10 --runs 5
	$(SMOKE) bench/bench_warehouses.py --runs 3 --warehouses 20 --repositories 2 --rounds 1 --tags 200
	$(SMOKE) bench/bench_pipeline.py --runs 2 --timeout 30
	$(SMOKE) bench/bench_idle.py --stages 20 --idle 5 --churn-stages 5 --promotions 20 --settle 1 --gc-interval 1
	$(SMOKE) bench/bench_stalls.py --runs 1
	$(SMOKE) bench/bench_projects.py --projects 2 --stages 5 --runs 5

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .cache
