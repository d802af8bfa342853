# Headwater: one entry point for set-up, the local stack, the demo, tests and benchmarks.
# Every target that needs Python or the jars runs `setup` first; setup is idempotent (seconds when warm).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup up down status demo test test-unit test-integration test-spark lint clean

setup:
	@bash stack/setup.sh

up: setup
	@$(PY) -m stack up

down:
	@if [ -x $(PY) ]; then $(PY) -m stack down; fi

status: setup
	@$(PY) -m stack status

demo: setup
	@$(PY) -m stack up
	@$(PY) -m stack.demo

lint: setup
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy .

# The test session starts its own broker on free ports (or uses HEADWATER_TEST_STACK_ENV=.headwater/stack.env).
test: setup lint
	@$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup
	@$(PY) -m pytest -m unit $(PYTEST_ARGS)

test-integration: setup
	@$(PY) -m pytest -m integration $(PYTEST_ARGS)

test-spark: setup
	@$(PY) -m pytest -m spark $(PYTEST_ARGS)

clean: down
	rm -rf .headwater/data .headwater/logs .headwater/run
