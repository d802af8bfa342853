# Headwater: one entry point for set-up, the local stack, the demo, tests and benchmarks.
# Every target that needs Python or the jars runs `setup` first; setup is idempotent (seconds when warm).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test` runs setup once, then its chunks with SETUP= (each chunk's own prerequisite; default: setup).
SETUP ?= setup
# The slowest tests of every run are listed at its end (to keep `make test` inside the CI budget).
PYTEST_DURATIONS ?= --durations=25
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)

.PHONY: setup native up down status demo test test-unit test-integration test-spark test-go test-ts test-sdk-python test-pythons lint clean \
	bench bench-peers bench-spark bench-go benchmarks-doc pipeline-artifact loadtest loadtest-distributed conformance chaos chaos-rules \
	setup-haproxy test-cluster test-long chaos-cluster chaos-regions chaos-spark bench-replication bench-rules bench-tls bench-subscribe

setup:
	@bash setup/setup.sh
	@$(MAKE) --no-print-directory native

# The gateway's compiled Avro reader (gateway/_avro_fast.c), built in place; the gateway runs without it (slower).
native:
	@$(PY) -c "from setuptools import Extension, setup; setup(name='headwater-native', script_args=['-q', \
		'build_ext', '--inplace'], ext_modules=[Extension('gateway._avro_fast', ['gateway/_avro_fast.c'])])"

# TOPOLOGY=cluster (or HEADWATER_TOPOLOGY=cluster): 3 brokers, 2 registries, GATEWAYS gateways behind HAProxy
# (docs/cluster.md). TOPOLOGY=regions: two regions on loopback, each a stack of its own, MirrorMaker 2 between them
# (docs/regions.md). Default: the single-node stack; each count can be set on its own (docs/local-stack.md, "Topology").
TOPOLOGY ?= $(HEADWATER_TOPOLOGY)
export HEADWATER_TOPOLOGY := $(TOPOLOGY)
ifdef GATEWAYS
export GATEWAYS
endif
SETUP_TOPOLOGY := setup $(if $(filter cluster regions,$(TOPOLOGY))$(GATEWAYS)$(HEADWATER_REGISTRIES),setup-haproxy)

# HAProxy (Debian package), for several gateways or registries only.
setup-haproxy:
	@bash setup/setup-haproxy.sh

up: $(SETUP_TOPOLOGY)
	@$(PY) -m stack up

down:
	@if [ -x $(PY) ]; then $(PY) -m stack down; fi

status: setup
	@$(PY) -m stack status

demo: $(SETUP_TOPOLOGY)
	@$(PY) -m stack up
	@$(PY) -m demo

lint: $(SETUP)
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy .
	@$(VENV)/bin/ruff check sdk-python
	@$(VENV)/bin/mypy --strict --config-file sdk-python/pyproject.toml sdk-python/src
	@$(VENV)/bin/mypy --strict --config-file sdk-python/pyproject.toml sdk-python/tests
	@$(VENV)/bin/mypy --strict --config-file sdk-python/pyproject.toml sdk-python/conformance

# The test session starts its own broker on free ports (or uses HEADWATER_TEST_STACK_ENV=.headwater/stack.env).
# Go and TypeScript SDK checks, the Python SDK's own tests (sdk-python/tests/) on this Python and on its others, then
# pytest (which includes the conformance vectors of every SDK and the gateway: tests/conformance/).
# Each chunk is timed (tests/support/chunk.py): .headwater/test-times.txt gets the seconds per chunk and per test
# folder (tests/support/times.py); only this full run writes it (narrower runs: .headwater/test-times-last.txt).
CHUNKS_LOG := .headwater/test-chunks.txt
CHUNK := HEADWATER_TEST_CHUNKS=$(CHUNKS_LOG) $(PY) -m tests.support.chunk
test: setup setup-haproxy
	@mkdir -p .headwater && rm -f $(CHUNKS_LOG)
	@$(CHUNK) lint $(MAKE) --no-print-directory lint SETUP=
	@$(CHUNK) test-go $(MAKE) --no-print-directory test-go SETUP=
	@$(CHUNK) test-ts $(MAKE) --no-print-directory test-ts SETUP=
	@$(CHUNK) test-sdk-python $(MAKE) --no-print-directory test-sdk-python SETUP=
	@$(CHUNK) test-pythons $(MAKE) --no-print-directory test-pythons SETUP=
	@HEADWATER_TEST_CHUNKS=$(CHUNKS_LOG) $(PY) -m pytest $(PYTEST_DURATIONS) $(PYTEST_ARGS)

# The Python SDK's own unit tests (sdk-python/tests/, no stack) on this Python (3.11); its integration tests against
# the real gateway and Kafka are in tests/sdk_python/ (pytest).
test-sdk-python: $(SETUP)
	@cd sdk-python && $(abspath $(PY)) -m pytest -q tests

# The Python SDK's unit tests on Python 3.9 and 3.13 (pyenv's; skipped, saying so, where they are absent).
test-pythons: $(SETUP)
	@bash sdk-python/scripts/test-pythons.sh

# The TypeScript SDK: strict type check, lint, the committed dist/ is the build of src/, node:test (built by setup).
test-ts: $(SETUP)
	@cd sdk-typescript && node_modules/.bin/tsc -p tsconfig.json --noEmit && node_modules/.bin/eslint . \
		&& node scripts/build.mjs check && node --test build/test/*.test.js

test-unit: setup
	@$(MAKE) --no-print-directory test-sdk-python SETUP=
	@$(PY) -m pytest -m unit $(PYTEST_ARGS)

test-integration: setup
	@$(PY) -m pytest -m integration $(PYTEST_ARGS)

test-spark: setup
	@$(PY) -m pytest -m spark $(PYTEST_ARGS)

# The gateway's fault suite and hostile-input suite at full counts: CHAOS_SCALE x the CI counts (50: about
# 260 k events through broker, gateway, registry and producer faults, each reconciled with Kafka).
CHAOS_SCALE ?= 50
chaos: setup
	@HEADWATER_CHAOS_SCALE=$(CHAOS_SCALE) HEADWATER_CHAOS=full $(PY) -m pytest -s -m integration tests/gateway/test_faults.py \
		tests/gateway/test_faults_processes.py tests/gateway/test_hostile.py tests/gateway/test_hostile_protocol.py \
		tests/gateway/test_hostile_process.py $(PYTEST_ARGS)

# The hostile-rule suite in full: a rule stuck in a micro-batch (watchdog) and the pipeline killed inside a rule's
# batch (quarantine at restart), each minutes long; `make test` runs its short checks.
chaos-rules: setup
	@HEADWATER_CHAOS=full $(PY) -m pytest -s tests/spark_pipeline/rules/test_hostile_stack.py $(PYTEST_ARGS)

# The cluster profile's fault suite (tests/cluster/: 3 brokers, 2 registries, 3 gateways, HAProxy) at CI counts
# (30,000 events per fault), and bigger: CHAOS_SCALE x 30,000 events per fault. Both hold a broker's loss to at most
# 10 s without a 200 per gateway and through HAProxy (HEADWATER_CLUSTER_WINDOW_GOAL_S); `make test` prints it.
test-cluster: setup setup-haproxy
	@HEADWATER_CLUSTER_EVENTS=30000 HEADWATER_CLUSTER_WINDOW_GOAL_S=10 $(PY) -m pytest -s -m cluster tests/cluster $(PYTEST_ARGS)

# What `make test` runs shortened, at full length: every conformance vector over TLS as well as plain (and the
# cluster faults, at 30,000 events each as in `make test`). The chaos-* targets go further.
test-long: setup setup-haproxy
	@HEADWATER_CONFORMANCE_TLS=all HEADWATER_CLUSTER_EVENTS=30000 $(PY) -m pytest tests/conformance tests/cluster \
		$(PYTEST_ARGS)

chaos-cluster: setup setup-haproxy
	@HEADWATER_CLUSTER_EVENTS=30000 HEADWATER_CLUSTER_WINDOW_GOAL_S=10 HEADWATER_CHAOS_SCALE=$(CHAOS_SCALE) HEADWATER_CHAOS_SPARK=1 \
		$(PY) -m pytest -s -m cluster tests/cluster $(PYTEST_ARGS)

# The regions profile's faults measured (docs/regions.md, "What each failure costs"): the Python, Go and TypeScript
# SDKs (their conformance drivers) at REGIONS_SCALE x 100 events/s each with endpoints [a, b]; region a killed with
# SIGKILL, restarted, the SDKs failing back; then a 60 s partition (MirrorMaker 2 stopped) with the Go client on
# [b, a]; both regions' pipelines run and must count every acknowledged event once and agree (at most 200 events/s
# per SDK then; HEADWATER_CHAOS_PIPELINES=0 leaves them out). About 10 minutes; every figure in the closing
# `regions-chaos` block. `make test` runs the short version (the Python SDK at 100 events/s, no partition).
REGIONS_SCALE ?= 5
chaos-regions: setup setup-haproxy
	@HEADWATER_CHAOS_REGIONS=full HEADWATER_CHAOS_SCALE=$(REGIONS_SCALE) $(PY) -m pytest -s \
		tests/regions/test_region_loss.py $(PYTEST_ARGS)

# Not a test: the same load on RF=1 and RF=3 topics of a private cluster; events per gateway and broker core-second.
bench-replication: setup setup-haproxy
	@$(PY) -m bench.replication

# Not a test: gateway and HAProxy CPU per event over plain HTTP and over TLS, alternating rounds (docs/security.md).
bench-tls: setup setup-haproxy
	@$(PY) -m bench.tls

# The Spark worker fault (tests/cluster/test_spark_cluster.py): the pipeline on a Spark standalone cluster, its worker
# killed with SIGKILL mid-batch while 3 SDK producers send >= 30,000 events; replay must equal the streaming outputs.
chaos-spark: setup
	@HEADWATER_CHAOS_SPARK=1 $(PY) -m pytest -s -m cluster tests/cluster/test_spark_cluster.py $(PYTEST_ARGS)

# Not a test: starts a private stack on free ports, prints the gateway's figures and one JSON line at the end.
bench: setup
	@$(PY) -m bench.gateway

# Not a test: the gateway against a native peer, Benthos v4.27.0 (built once from the Go module proxy), on one private
# broker, A/B interleaved; prints the ratios and appends its JSON line to docs/benchmarks/runs/peers.jsonl.
bench-peers: setup
	@$(PY) -m bench.peers

# Not a test: the Spark pipeline's throughput and latency against the running stack (`make up` first).
bench-spark: setup
	@$(PY) -m bench.spark

# Not a test: rule latency (created_at -> rule output), apply -> running query, cost of 0/5/20 rules (`make up` first).
bench-rules: setup
	@$(PY) -m bench.rules

# Not a test: the subscription server on a private stack: commit -> subscriber latency at 1, 100, 1,000 subscribers,
# CPU and memory per subscriber, what slow subscribers cost the others, one consumer per subscriber for comparison.
bench-subscribe: setup
	@$(PY) -m bench.subscribe $(BENCH_ARGS)

# docs/benchmarks/*.md from the JSON lines the benchmarks print (docs/benchmarks/README.md).
benchmarks-doc: setup
	@$(PY) -m bench.report

# What spark-submit takes: dist/pipeline/headwater_pipeline.zip, its entry file, requirements.txt.
pipeline-artifact: setup
	@$(PY) -m deploy.pipeline_artifact

# Stops the stack, then deletes what HEADWATER_STATE_DIR (else .headwater) holds but the jars and the write key.
clean:
	@if [ -x $(PY) ]; then $(PY) -m stack clean; fi

# Load test against the running stack (loadtest/README.md): NODES distinct nodes, each sending RATE events/s in
# batches of BATCH events, multiplexed over USERS connections, for DURATION seconds; then the reconciliation.
NODES ?= 100000
RATE ?= 0.037
BATCH ?= 10
USERS ?= 250
DURATION ?= 270
SHAPE ?= soak
WORKERS ?= 2
# Default: the running stack's, $(HEADWATER_STATE_DIR)/stack.env (else .headwater/stack.env).
STACK_ENV ?=
LOADTEST_ARGS = --nodes $(NODES) --rate $(RATE) --batch $(BATCH) --users $(USERS) --duration $(DURATION) \
	--shape $(SHAPE) $(if $(STACK_ENV),--stack-env $(STACK_ENV))

loadtest: setup
	@$(PY) -m loadtest.run $(LOADTEST_ARGS)

loadtest-distributed: setup
	@$(PY) -m loadtest.run $(LOADTEST_ARGS) --workers $(WORKERS)

# The Go SDK: vet, staticcheck (pinned, installed by setup) and the race-enabled unit tests (the integration
# tests run in pytest: tests/sdk_go/).
test-go: $(SETUP)
	@cd sdk-go && GOTOOLCHAIN=local $(GO) vet ./... && GOTOOLCHAIN=local ../.headwater/bin/staticcheck ./... \
		&& (cd bench && GOTOOLCHAIN=local ../../.headwater/bin/staticcheck ./...) \
		&& GOTOOLCHAIN=local $(GO) test -race -count=1 ./...

# Not a test: the Go SDK against analytics-go and posthog-go in one run (sdk-go/README.md, "Benchmark").
bench-go: setup
	@cd sdk-go/bench && GOTOOLCHAIN=local $(GO) test -run '^$$' -bench . -benchmem -benchtime 100000x .

# Conformance vectors (sdk-specs/README.md) against every SDK of sdk-specs/conformance/sdks.json and the gateway
# (on a private stack, or on CONFORMANCE_STACK_ENV=.headwater/stack.env); writes sdk-specs/compliance.md.
# SDK=<name|gateway> runs one target, VECTOR=<id prefix> some vectors.
conformance: setup
	@PYTHONPATH=sdk-specs/conformance:. $(PY) -m hwconformance --compliance $(if $(SDK),--target $(SDK)) \
		$(if $(VECTOR),--vector $(VECTOR)) $(if $(wildcard $(CONFORMANCE_STACK_ENV)),--stack-env $(CONFORMANCE_STACK_ENV))
