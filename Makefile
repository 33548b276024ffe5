# Holdline: the two commands a fresh machine needs are `make run` and `make test`.
GO ?= go
BIN := bin/holdline
# System packages. Installed once, idempotently:
# libspeexdsp for echo cancellation, espeak-ng and sox to synthesise the
# barge-in corpus and as the local voice, pocketsphinx to transcribe it and
# as the local recogniser, libopus (with pkg-config) for WebRTC audio.
APT_PACKAGES := libspeexdsp1 libspeexdsp-dev espeak-ng sox pocketsphinx pocketsphinx-en-us \
	pkg-config libopus-dev libopusfile-dev
# The browser tests: Debian's Chromium, driven by playwright-core. The SIP
# tests: sipp (Debian's sip-tester) and baresip as the phones. coturn as
# the TURN server a caller in a network namespace reaches the agent through.
# Kamailio as the registrar and proxy Holdline registers with (the tests
# start their own; Debian's service, if its package started one, is
# stopped by test-deps so that nothing else holds port 5060). HAProxy and
# Kamailio as the front doors of the cluster test (test-cluster).
APT_TEST_PACKAGES := chromium sip-tester baresip-core redis-server coturn prometheus kamailio kamailio-tls-modules haproxy
# Silero VAD: the ONNX Runtime library from the npm package onnxruntime-node
# and the model from @livekit/agents-plugin-silero, fetched with npm pack.
MODELS_DIR ?= $(HOME)/.cache/holdline
ORT_NPM := onnxruntime-node@1.30.0
SILERO_NPM := @livekit/agents-plugin-silero@1.9.0
# livekit-server for the LiveKit tests and the bench, built from its Go
# module (about two minutes, once) where internal/livekittest looks for it:
# os.UserCacheDir()/holdline/livekit-server-v1.8.4/livekit-server.
LIVEKIT_SERVER := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/holdline/livekit-server-v1.8.4/livekit-server

# ECHO_TIMED are the carrier tests that judge barge-in on an echoing line
# in real time (make test runs them on their own).
ECHO_TIMED := TestCarrierGreetingOverAnEchoingLine|TestBargeInThroughTwilio|TestBargeInThroughTelnyxAndPlivo
# ECHO_TIMED_CLI are serve's carrier calls over an echoing line, on the
# local recogniser, and the drain that times the gap a moved browser call
# hears (run on their own as well).
ECHO_TIMED_CLI := TestTwilioCallToServeBooksOnce|TestTelnyxCallToServeBooksOnce|TestPlivoCallToServeBooksOnce|TestSIGTERMDrainsTheWorkerAndItsCallMovesToAnother
# MOVE_TIMED is the server's drain of eight WebRTC calls, which times the
# gap each caller hears while it moves (run on its own).
MOVE_TIMED := TestDrainMovesEveryWebRTCCall
# LIVEKIT_TIMED are the LiveKit tests that time barge-in at the caller or
# count every caller's turn answered in real time (run on their own too).
LIVEKIT_TIMED := TestBargeInThroughLiveKit|TestLiveKitRoomsBenchmarkRuns

.PHONY: run test test-cluster build deps test-deps apt models vet bench clean

build:
	$(GO) build -o $(BIN) ./cmd/holdline

# run: serve the booking agent to browsers; open the URL it prints. With no
# OPENAI_API_KEY it runs on this machine: demo model, espeak-ng voice,
# pocketsphinx. HTTP_ADDR changes the address.
HTTP_ADDR ?= 127.0.0.1:8080
run: deps build
	./$(BIN) serve --agent booking --http $(HTTP_ADDR)

# deps installs what the tests need; a no-op when everything is present.
deps:
	@$(MAKE) --no-print-directory apt PACKAGES="$(APT_PACKAGES)"

test-deps: deps $(LIVEKIT_SERVER)
	@$(MAKE) --no-print-directory apt PACKAGES="$(APT_TEST_PACKAGES)"
	@if [ -s /run/kamailio/kamailio.pid ] && kill -0 "$$(cat /run/kamailio/kamailio.pid)" 2>/dev/null; then \
		echo "stopping the kamailio service the package started"; \
		systemctl disable --now kamailio 2>/dev/null || kill "$$(cat /run/kamailio/kamailio.pid)"; \
	fi
	@if [ -s /run/haproxy.pid ] && kill -0 "$$(cat /run/haproxy.pid)" 2>/dev/null; then \
		echo "stopping the haproxy service the package started"; \
		systemctl disable --now haproxy 2>/dev/null || kill "$$(cat /run/haproxy.pid)"; \
	fi
	@test -d test/browser/node_modules/playwright-core -a -d test/browser/node_modules/whip-whep -a -d test/browser/node_modules/livekit-client || (cd test/browser && npm ci --no-audit --no-fund)

$(LIVEKIT_SERVER):
	$(GO) run ./internal/livekittest/cmd/buildlivekit

apt:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$missing; \
	fi

# models fetches the Silero VAD model and the ONNX Runtime library into
# MODELS_DIR; a no-op when both are there.
models: $(MODELS_DIR)/libonnxruntime.so.1 $(MODELS_DIR)/silero_vad.onnx

$(MODELS_DIR)/libonnxruntime.so.1:
	@mkdir -p $(MODELS_DIR)/npm
	cd $(MODELS_DIR)/npm && npm pack --silent $(ORT_NPM) >/dev/null
	tar xzf $(MODELS_DIR)/npm/onnxruntime-node-*.tgz -O package/bin/napi-v6/linux/x64/libonnxruntime.so.1 >$@.tmp && mv $@.tmp $@
	rm -f $(MODELS_DIR)/npm/onnxruntime-node-*.tgz

$(MODELS_DIR)/silero_vad.onnx:
	@mkdir -p $(MODELS_DIR)/npm
	cd $(MODELS_DIR)/npm && npm pack --silent $(SILERO_NPM) >/dev/null
	tar xzf $(MODELS_DIR)/npm/livekit-agents-plugin-silero-*.tgz -O package/dist/silero_vad.onnx >$@.tmp && mv $@.tmp $@
	rm -f $(MODELS_DIR)/npm/livekit-agents-plugin-silero-*.tgz

vet:
	$(GO) vet ./...
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$unformatted" ]; then echo "not gofmt-ed (gofmt -w them):"; echo "$$unformatted"; exit 1; fi

test: test-deps models vet build
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 20m -artifacts -skip '^(TestBrowser|TestCluster|$(ECHO_TIMED)|$(ECHO_TIMED_CLI)|$(LIVEKIT_TIMED)|$(MOVE_TIMED))' ./...
	# The carrier tests that time an echoing line's barge-in in real time:
	# alone, as the browser tests below, not beside every other package.
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 5m -run '^($(ECHO_TIMED))$$' ./carrier
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 5m -run '^($(ECHO_TIMED_CLI))$$' ./cli
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 5m -run '^($(LIVEKIT_TIMED))$$' ./livekit
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 5m -run '^($(MOVE_TIMED))$$' ./server
	# The browser tests time the agent's audio at the page in real time: run
	# alone, not beside every other package's tests on two cores.
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 15m -artifacts -run '^TestBrowser' ./cli
	@$(MAKE) --no-print-directory test-cluster
	./$(BIN) simulate examples/scenarios examples/pizza/scenarios --sweep 2000
	# Once more with speculative answers on in every file, against the
	# invariants (files timed for answers asked at the end of the turn say
	# speculate: false).
	./$(BIN) simulate examples/scenarios examples/pizza/scenarios --sweep 2000 --speculate=true

# test-cluster: three workers in network namespaces behind Kamailio and
# HAProxy (deploy/), a rolling restart, a killed and a hung worker, on
# their own: the short run (12 phone and 6 browser calls; about 2 minutes).
# HOLDLINE_CLUSTER=full places 60 and 20.
test-cluster: test-deps models build
	HOLDLINE_MODELS_DIR=$(MODELS_DIR) HOLDLINE_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout 12m -v -run '^TestCluster$$' ./deploy

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./media/ ./runtime/ ./runtime/engine/ ./vad/ ./tools/ ./sim/ ./llm/openai/ ./tts/espeak/ ./stt/pocketsphinx/

clean:
	rm -rf bin
