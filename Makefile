# Holdline: the two commands a fresh machine needs are `make run` and `make test`.
GO ?= go
BIN := bin/holdline
# System packages the tests use. Installed once, idempotently.
APT_PACKAGES :=

.PHONY: run test build deps vet bench clean

build:
	$(GO) build -o $(BIN) ./cmd/holdline

# run: the console with the booking agent (type as the caller).
run: build
	./$(BIN) console --agent booking

# deps installs what the tests need; a no-op when everything is present.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$missing; \
	fi

vet:
	$(GO) vet ./...

test: deps vet build
	$(GO) test -race -count=1 ./...
	./$(BIN) simulate examples/scenarios --sweep 2000

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./media/ ./runtime/ ./vad/ ./tools/ ./sim/

clean:
	rm -rf bin
