# PushRelay — the two commands: `make run` and `make test`. Both install what is missing first.
SHELL := /bin/bash
SWIFT ?= swift
# Debian packages the build and the tests need.
APT_PACKAGES := libmicrohttpd-dev libsqlite3-dev libssl-dev libpq-dev libnghttp2-dev pkg-config
# Test-only tools: strace injects fsync errors in the fault tests; curl drives the contract test;
# headless Chromium and its driver open the operator console; PostgreSQL runs the suite again
# and the two-node tests (started per run in a temporary directory by Tests/Postgres/pg.sh);
# Node and tsc (node-typescript) check and test the JavaScript SDK (clients/js/check.sh).
TEST_PACKAGES := strace curl chromium chromium-driver postgresql node-typescript
# Extra packages for benchmarks only.
BENCH_PACKAGES := wrk nginx-light libnginx-mod-nchan mosquitto redis-server linux-perf gcc
DEV_ENV := .pushrelay-dev.env
# `make run` lets push URLs reach local receivers on any port; the relay's own default allows
# nothing local. Override with PUSHRELAY_PUSH_ALLOWED_HOSTS in the environment or in $(DEV_ENV).
DEV_PUSH_ALLOWED_HOSTS := 127.0.0.1:*,[::1]:*
# Python test peers, installed from PyPI into a virtual environment.
VENV := .venv
PY_PACKAGES := websockets==17.4 schemathesis==4.32.5 cryptography==50.0.2 selenium==4.51.0 h2==4.4.1 http-ece==1.2.1
# A real Matrix homeserver for the push gateway test, in its own environment (its pins are its own).
SYNAPSE_VENV := .venv-synapse
SYNAPSE_PACKAGE := matrix-synapse==1.163.2

.PHONY: deps test-deps build release run test test-end-to-end test-js test-clients sanitizers-and-clients sanitizers test-postgres bench clean lint fuzz fuzz-smoke fuzz-api tsan asan screenshot

## deps: install the Debian packages building and running need (apt-get update once,
## non-interactive install); test-deps: those and what the tests need
INSTALL_MISSING = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
deps:
	@$(call INSTALL_MISSING,$(APT_PACKAGES))
test-deps:
	@$(call INSTALL_MISSING,$(APT_PACKAGES) $(TEST_PACKAGES))

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## run: build (release) and start the relay on 127.0.0.1:8080 with ./pushrelay.sqlite
run: release
	@if [ ! -f $(DEV_ENV) ]; then \
	  (umask 077; echo "PUSHRELAY_SERVER_KEYS=dev_$$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')" > $(DEV_ENV)); \
	fi
	@chmod 600 $(DEV_ENV)
	@set -a; . ./$(DEV_ENV); set +a; \
	export PUSHRELAY_PUSH_ALLOWED_HOSTS=$${PUSHRELAY_PUSH_ALLOWED_HOSTS-$(DEV_PUSH_ALLOWED_HOSTS)}; \
	listen=$${PUSHRELAY_LISTEN:-127.0.0.1:8080}; \
	echo "server key: $$PUSHRELAY_SERVER_KEYS   (kept in $(DEV_ENV), mode 0600)"; \
	echo "push URLs allowed (development value): $$PUSHRELAY_PUSH_ALLOWED_HOSTS"; \
	echo "try:"; \
	echo "  curl -s -X POST http://$$listen/v1/messages -H 'Authorization: Bearer '$$PUSHRELAY_SERVER_KEYS \\"; \
	echo "       -H 'Content-Type: application/json' -d '{\"id\":\"m1\",\"recipients\":[\"alice\"],\"payload\":{\"text\":\"hi\"}}'"; \
	echo "  curl -s http://$$listen/v1/users/alice/messages -H 'Authorization: Bearer '$$PUSHRELAY_SERVER_KEYS"; \
	exec .build/release/pushrelay serve

## venv: the python test peers (python `websockets`; `h2` and `http-ece` for the push service doubles)
$(VENV)/.installed: Makefile
	@command -v python3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv; }
	python3 -m venv $(VENV) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv && python3 -m venv $(VENV); }
	$(VENV)/bin/pip install -q --disable-pip-version-check $(PY_PACKAGES)
	touch $@

$(SYNAPSE_VENV)/.installed: Makefile
	@command -v python3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv; }
	python3 -m venv $(SYNAPSE_VENV)
	$(SYNAPSE_VENV)/bin/pip install -q --disable-pip-version-check $(SYNAPSE_PACKAGE)
	touch $@

## test: build and run every test (unit and end-to-end against the real binary, python peers
## for the WebSocket and the push webhooks, a short fuzz run, the sanitizers). The sanitizer
## stages (their builds, then the whole Swift suite under each) run beside the end-to-end tests,
## which mostly wait on sockets, timers and servers (the README says how long it takes), and the
## tests run on a busy machine every time, as they must pass there.
test: test-deps $(VENV)/.installed $(SYNAPSE_VENV)/.installed
	$(SWIFT) format lint --strict -r Sources Tests Benchmarks/LoadTool examples/chat/Sources
	python3 Tests/Docs/links.py
	python3 Tests/Docs/facts.py
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory -j2 --output-sync=line test-end-to-end sanitizers-and-clients

## test-end-to-end: the Swift tests and every peer, on SQLite then PostgreSQL (after `swift build --build-tests`)
test-end-to-end:
	PUSHRELAY_BIN=$$(pwd)/.build/debug/pushrelay $(SWIFT) test --skip-build
	$(VENV)/bin/python Tests/Peers/pushdoubles_selftest.py
	$(VENV)/bin/python Tests/Peers/webpush_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/pushservices_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/apps_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/websocket_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/notifier_peer.py .build/debug/pushrelay
	Tests/Peers/contract.sh .build/debug/pushrelay 15
	$(VENV)/bin/python Tests/Peers/faults.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/idle_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/adversary.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/example_receiver.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/tls_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/matrix_peer.py .build/debug/pushrelay $(SYNAPSE_VENV)
	Tests/Postgres/pg.sh run $(MAKE) --no-print-directory test-postgres
	Tests/SDKApp/check.sh .build/debug/pushrelay
	deploy/check-packages.sh .build/debug/pushrelay

## test-js: the JavaScript SDK (clients/js): tsc type checks (page and worker apart), the shipped
## .d.ts, and node --test (the pure parts, the service worker helper, end to end against the relay)
test-js: test-deps
	clients/js/check.sh .build/debug/pushrelay

## sanitizers-and-clients: the second half of `make test`, beside test-end-to-end (the halves take
## about as long; a fresh clone kept busy ended them at 1,209 and 1,415 s with the SDK's app here):
## the sanitizers, then the clients and the hardening peer on the debug binary
sanitizers-and-clients:
	$(MAKE) --no-print-directory sanitizers
	$(MAKE) --no-print-directory test-clients

## test-clients: the JavaScript SDK (clients/js/check.sh), the web example and the operator console
## in headless Chromium, the Swift SDK behind a dead link, and the push
## services' hardening checks (after `swift build --build-tests`)
test-clients:
	clients/js/check.sh .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/browser_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/console_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/deadlink_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/hardening_peer.py .build/debug/pushrelay

## sanitizers: the short fuzz run, then every Swift test under the thread and the address sanitizer
sanitizers:
	$(MAKE) --no-print-directory fuzz-smoke
	$(MAKE) --no-print-directory tsan
	$(MAKE) --no-print-directory asan

## test-postgres: the store's tests and the end-to-end suite (Swift, WebSocket and notifier peers) again on PostgreSQL,
## and the two-node tests; needs PUSHRELAY_TEST_POSTGRES (`make test` runs it through
## Tests/Postgres/pg.sh, which starts and stops a PostgreSQL for it)
test-postgres:
	@test -n "$$PUSHRELAY_TEST_POSTGRES" || { echo "run it as: Tests/Postgres/pg.sh run make test-postgres"; exit 2; }
	PUSHRELAY_BIN=$$(pwd)/.build/debug/pushrelay $(SWIFT) test --skip-build --filter 'RelayServerTests|SQLStoreTests|OutboxDifferentialTests/theSQLStore'
	$(VENV)/bin/python Tests/Peers/websocket_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/notifier_peer.py .build/debug/pushrelay
	$(VENV)/bin/python Tests/Peers/cluster_peer.py .build/debug/pushrelay

## fuzz: libFuzzer on the WebSocket codec, the JSON parser + request decoding + UTF-8 validator, and
## JWT parsing (FUZZ_SECONDS per target, default 300)
FUZZ_SECONDS ?= 300
FUZZ_TARGETS := FuzzWebSocket FuzzJSON FuzzToken
fuzz:
	@for target in $(FUZZ_TARGETS); do \
	  PUSHRELAY_FUZZ=1 $(SWIFT) build --sanitize=fuzzer --scratch-path .build/fuzz --product $$target || exit 1; \
	  mkdir -p .build/fuzz-corpus/$$target; \
	  SWIFT_BACKTRACE=enable=no .build/fuzz/debug/$$target Tests/FuzzRegressions/$$target/* || exit 1; \
	  SWIFT_BACKTRACE=enable=no .build/fuzz/debug/$$target -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	    -print_final_stats=1 .build/fuzz-corpus/$$target || exit 1; \
	done

## fuzz-smoke: a short bounded fuzz run, part of `make test`
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=15

## tsan: every Swift test under the thread sanitizer, the relay binary built with it too;
## halt_on_error makes any report fail the run (TSan reports alone do not fail a test)
tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	TSAN_OPTIONS=halt_on_error=1 PUSHRELAY_BIN=$$(pwd)/.build/tsan/debug/pushrelay \
	  $(SWIFT) test --sanitize=thread --scratch-path .build/tsan

## asan: the same under the address sanitizer and LeakSanitizer (toolchain leaks suppressed in
## Tests/lsan.supp; a leak in the relay makes it exit non-zero, which the tests notice)
asan: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	LSAN_OPTIONS=suppressions=$$(pwd)/Tests/lsan.supp PUSHRELAY_BIN=$$(pwd)/.build/asan/debug/pushrelay \
	  $(SWIFT) test --sanitize=address --scratch-path .build/asan

## screenshot: the operator console's picture in docs/API.md (docs/console.png), from a real browser
screenshot: test-deps $(VENV)/.installed
	$(SWIFT) build
	$(VENV)/bin/python Tests/Peers/console_peer.py .build/debug/pushrelay --screenshot docs/console.png

## fuzz-api: a longer schemathesis run against openapi.yaml (200 examples per operation and pass)
fuzz-api: test-deps build $(VENV)/.installed
	Tests/Peers/contract.sh .build/debug/pushrelay 200

## bench: every benchmark of BENCHMARKS.md with its anchors (nginx, nchan, a bare libmicrohttpd
## handler, Redis, mosquitto; installed when missing), RUNS times; the table goes into BENCHMARKS.md
bench: release
	@missing=""; for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	Benchmarks/bench.sh

lint:
	$(SWIFT) format lint --strict -r Sources Tests Benchmarks/LoadTool examples/chat/Sources

clean:
	rm -rf .build
