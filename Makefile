# redislock: the two commands a newcomer needs are `make demo` and `make test`.
# Both install what is missing (redis-server through apt-get when root).

GO ?= go
# Packages with goroutines run under the race detector; that is all of them.
GOTEST ?= $(GO) test -race -count=1

.PHONY: all demo test bench fuzz lint fmt vet redis tools

all: test

## demo: elect a leader among local processes on a throwaway Redis, kill it, time the handover.
demo: redis
	$(GO) run . demo $(DEMO_ARGS)

## test: format and vet checks, then every test against real redis-server processes.
test: redis fmt vet
	$(GOTEST) ./...
	cd test/bench && $(GO) vet ./...

## bench: our lock against bsm/redislock, redsync, rueidislock and raw go-redis, with a table of ratios.
bench: redis
	test/bench/run.sh

## fuzz: fuzz the stored-value decoder (FUZZTIME, default 30s).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseValue -fuzztime $${FUZZTIME:-30s} ./pkg/redislock/

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

redis:
	@hack/ensure-redis.sh
