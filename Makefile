# Two entry points (see README): `make demo` runs the main job, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint unit test-cluster kube-apiserver bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m app serve --demo --port 0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/python -m pytest

test: lint unit

# The cluster suite (tests/cluster) against a real kube-apiserver + etcd: built once from
# Debian's kubernetes source package and cached in .cache/apiserver (see docs/operator-guide.md).
kube-apiserver:
	bash scripts/build-kube-apiserver.sh

test-cluster: $(STAMP) kube-apiserver
	LONGSHOREMAN_CLUSTER_BACKENDS=real $(BIN)/python -m pytest tests/cluster

bench: $(STAMP)
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_expressions.py
	$(BIN)/python bench/bench_git.py
	$(BIN)/python bench/bench_runner.py
	$(BIN)/python bench/bench_reaction.py
	$(BIN)/python bench/bench_scale.py
	$(BIN)/python bench/bench_verification.py
	$(BIN)/python bench/bench_github.py
	$(BIN)/python bench/bench_slack.py
	$(BIN)/python bench/bench_pages.py
	$(BIN)/python bench/bench_warehouses.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .cache
