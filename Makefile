# redislock: the two commands a newcomer needs are `make demo` and `make test`.
# Both install what is missing (redis-server, and for make test promtool, through apt-get when root).

GO ?= go
# Packages with goroutines run under the race detector; that is all of them.
GOTEST ?= $(GO) test -race -count=1 -timeout=40m

# Tools build from pinned modules under hack/tools into bin/ (see hack/ensure-tools.sh).
TOOLS := hack/ensure-tools.sh
CONTROLLER_GEN = $(shell $(TOOLS) --print controller-gen)
CRD_REF_DOCS = $(shell $(TOOLS) --print crd-ref-docs)
GOLANGCI_LINT = $(shell $(TOOLS) --print golangci-lint)
HELM = $(shell $(TOOLS) --print helm)

.PHONY: all demo test test-unit test-integration test-e2e test-soak cluster-test bench bench-failover chaos fuzz lint fmt vet redis packages tools generate manifests verify-generated chart image

all: test

## demo: the whole system on this machine: Redis, a throwaway control plane, the controller
## with its webhook, three sample-operator replicas and an agent-injected workload; it kills
## the leaders, times the handovers and stops everything (DEMO_ARGS: -keep, -single, -ttl, -log).
## demo CLUSTER=1: the same story on a real single-node cluster (hack/cluster, root only): helm
## install, a Deployment with the injected agent, kubectl get pods -L redislock.io/leader, the
## leader pods deleted (DEMO_ARGS: -keep leaves the cluster up).
ifeq ($(CLUSTER),1)
demo:
	$(GO) run ./hack/cluster demo $(DEMO_ARGS)
else
demo: redis
	@assets=$$($(TOOLS) --print-assets) && mkdir -p bin/demo && \
	$(GO) build -o bin/demo/redislock . && $(GO) build -o bin/demo/sampleoperator ./test/e2e/sampleoperator && \
	$(GO) run ./hack/demo -redislock bin/demo/redislock -sample-operator bin/demo/sampleoperator -assets "$$assets" $(DEMO_ARGS)
endif

## test: format, vet and generated-code checks, then every test against real
## redis-server processes and a real kube-apiserver + etcd (envtest). Each step
## says what it does before it starts; at the end (pass or fail), how long each took.
test:
	@steps=""; trap 'printf "make test: time per step:%b\n" "$$steps" >&2' EXIT; \
	step() { what=$$1; shift; echo "make test: $$what" >&2; start=$$(date +%s); "$$@" || exit; \
		steps="$$steps\n  $$(printf %5s $$(( $$(date +%s) - start ))s)  $${what%%:*}"; }; \
	step "packages: redis-server, valkey-server and promtool on PATH (apt-get install when missing)" $(MAKE) --no-print-directory packages && \
	step "tools: builds what bin/ lacks, one line per build (all cold on 2 cores: about 10 min)" $(MAKE) --no-print-directory tools && \
	step "fmt: gofmt -l" $(MAKE) --no-print-directory fmt && \
	step "vet: go vet ./... (a few minutes with a cold build cache)" $(MAKE) --no-print-directory vet && \
	step "lint: golangci-lint run ./... (a few minutes with a cold lint cache)" $(MAKE) --no-print-directory lint && \
	step "verify-generated: controller-gen, then git status of api, config, charts" $(MAKE) --no-print-directory verify-generated && \
	step "bench vet: go vet in the test/bench module" sh -c 'cd test/bench && $(GO) vet ./...' && \
	step "test-unit: the unit rung (builds every test binary with the race detector first: minutes when cold)" env $(TEST_ENV) hack/test-rung.sh unit && \
	step "test-integration and test-e2e: the two rungs side by side (the first busies the CPUs, the second mostly waits on timers)" \
		env $(TEST_ENV) CHAOS_SMOKE=0 hack/test-rung.sh integration e2e && \
	step "test-soak: the soak rung" env $(TEST_ENV) hack/test-rung.sh soak

# The test ladder (CONTRIBUTING.md): four rungs, fastest first, each run by hack/test-rung.sh,
# which prints its time. make test runs them in order, but integration and e2e side by side
# (e2e without its chaos smoke run: the soak rung runs TestChaos longer), and stops at the first
# step that fails.
TEST_ENV = GO="$(GO)" GOTEST="$(GOTEST)" MAKE="$(MAKE)" KUBEBUILDER_ASSETS=$$($(TOOLS) --print-assets) HELM=$$($(TOOLS) --print helm) THIRD_PARTY_CRDS=$$($(TOOLS) --print crds)

## test-unit: the unit rung, about a minute warm: pure logic, the chart's renders, the docs, layout
## and Dockerfile checks (go test -short: no redis-server and no API server is started).
test-unit: tools
	@env $(TEST_ENV) hack/test-rung.sh unit

## test-integration: the integration rung: every package but test/e2e and test/cluster against real
## redis-servers and envtest and, beside them, the lock engine's tests (pkg/redislock) on valkey-server.
test-integration: packages tools
	@env $(TEST_ENV) hack/test-rung.sh integration

## test-e2e: the e2e rung: test/e2e, the controller, agents and webhook end to end, the fault
## scenarios, and a chaos run of CHAOS_SMOKE (default 15s) per Redis deployment.
test-e2e: packages tools
	@env $(TEST_ENV) hack/test-rung.sh e2e

## test-soak: the soak rung: the cost budgets over their long windows, the chaos run for CHAOS_SOAK
## (default 40s) per Redis deployment, then the real single-node cluster (cluster-test, as root).
test-soak: packages tools
	@env $(TEST_ENV) hack/test-rung.sh soak

## cluster-test: test/cluster on a real single-node cluster that it brings up and down
## (hack/cluster, root only: it makes namespaces, mounts and cgroups; skipped otherwise).
cluster-test:
	@if [ "$$(id -u)" != 0 ]; then echo "cluster-test: skipped: hack/cluster needs root"; exit 0; fi; \
	$(TOOLS) node envtest helm && \
	REDISLOCK_CLUSTER=start $(GO) test -race -count=1 -timeout=20m -v ./test/cluster/

## bench: every benchmark, then docs/bench/REPORT.md with PNG plots (about 85 minutes on 2 cores): our lock against
## bsm/redislock, redsync, rueidislock and raw go-redis, Redlock over 1 to 7 nodes, 10,000 and 1,000 waiters on one
## Client, the controller with 1,000, 5,000 and 10,000 RedisLocks on one Redis and on a Cluster, failover, Redis
## plugin against Lease, 8 trials at 4s/3s/1s, leadership through a 30s API-server outage, Redis plugin against Lease,
## and the steady-state cost (Redis commands/s, API writes and reads/min) of the Redis agent and plugin against Lease
## at 1, 5 and 20 candidates, server-side fencing's lag, sharded leadership against a Lease per bucket and the sharded
## operator under faults for 10 minutes per Redis deployment (knobs: test/bench/run.sh).
bench: redis tools
	KUBEBUILDER_ASSETS=$$($(TOOLS) --print-assets) test/bench/run.sh

## bench-failover: failover and handover, Redis plugin against Lease election (FAILOVER_TRIALS, default 20;
## FAILOVER_DURATIONS, default 15s,10s,2s: controller-runtime's defaults; FAILOVER_JSON: a file for the trials).
bench-failover: redis tools
	FAILOVER_TRIALS=$${FAILOVER_TRIALS:-20} KUBEBUILDER_ASSETS=$$($(TOOLS) --print-assets) $(GO) test -count=1 -timeout 90m -run TestFailoverBenchmark -v ./test/e2e/

## chaos: the chaos runs of test/e2e for longer, of one lock (TestChaos) and of the sharded operator
## (TestShardedChaos): CHAOS_DURATION per Redis deployment, default 10m; CHAOS_SEED replays one;
## CHAOS_WAIT_REPLICAS sets Sentinel's waitReplicas instead of the default; CHAOS_RUN=TestChaos/cluster
## runs one deployment. make test runs them for 40s per deployment (soak rung).
chaos: redis tools
	CHAOS_DURATION=$${CHAOS_DURATION:-10m} KUBEBUILDER_ASSETS=$$($(TOOLS) --print-assets) $(GO) test -count=1 -timeout 0 -run "$${CHAOS_RUN:-^(TestChaos|TestShardedChaos)$$}" -v ./test/e2e/

## fuzz: fuzz the stored-value decoder (FUZZTIME, default 30s).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseValue -fuzztime $${FUZZTIME:-30s} ./pkg/redislock/

## generate: deepcopy code for the API types, and their reference, docs/api.md (crd-ref-docs).
generate:
	$(CONTROLLER_GEN) object paths=./api/...
	$(CRD_REF_DOCS) --source-path=./api/v1alpha1 --config=hack/crd-ref-docs.yaml --renderer=markdown --output-path=docs/api.md

## manifests: the CRDs, the RBAC roles of the controller and the agent, and the webhook configuration, from the markers;
## the tenancy policies (config/policy, hand-written) are copied too;
## the Helm charts get copies (charts/redislock/crds and files/, charts/redislock-crds/files/crds).
manifests:
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=config/crd/bases
	$(GO) run ./hack/crdrules config/crd/bases/*.yaml
	$(CONTROLLER_GEN) rbac:roleName=redislock-controller paths=./internal/controller/... paths=./internal/controllercmd/... paths=./internal/webhookcert/... output:rbac:dir=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=redislock-agent paths=./internal/agent/... output:rbac:dir=config/rbac/agent
	$(CONTROLLER_GEN) webhook paths=./internal/inject/... output:webhook:dir=config/webhook
	cp config/crd/bases/*.yaml charts/redislock/crds/
	cp config/crd/bases/*.yaml charts/redislock-crds/files/crds/
	cp config/rbac/agent/clusterconnection_reader.yaml charts/redislock/files/clusterconnection-reader.yaml
	cp config/rbac/agent/pod_reader.yaml charts/redislock/files/agent-pod-reader.yaml
	cp config/rbac/role.yaml charts/redislock/files/rbac.yaml
	cp config/rbac/agent/role.yaml charts/redislock/files/agent-role.yaml
	cp config/rbac/agent/policy.yaml charts/redislock/files/agent-policy.yaml
	cp config/webhook/manifests.yaml charts/redislock/files/webhook.yaml
	cp config/policy/tenancy.yaml charts/redislock/files/tenancy.yaml
	cp config/policy/fencing.yaml charts/redislock/files/fencing.yaml
	cp config/rbac/metrics_auth.yaml charts/redislock/files/metrics-auth.yaml

## verify-generated: fail if generate or manifests would change the tree.
verify-generated: generate manifests
	@out=$$(git status --porcelain -- api config charts docs/api.md); if [ -n "$$out" ]; then echo "generated files are stale; run 'make generate manifests' and commit:"; echo "$$out"; exit 1; fi

## chart: the Helm charts packaged into dist/redislock-<version>.tgz and
## dist/redislock-crds-<version>.tgz, with the version and appVersion of their Chart.yaml (the
## appVersion is what `redislock version` prints), so they install without a clone:
## helm install redislock dist/redislock-<version>.tgz.
chart:
	$(HELM) lint --strict charts/redislock charts/redislock-crds
	$(HELM) package charts/redislock charts/redislock-crds --destination dist

## image: the controller's (and agent's) image, ghcr.io/redislock/redislock:<appVersion>, built with
## CONTAINER_TOOL (docker; podman works too) from the Dockerfile, labelled with the chart's appVersion.
## IMAGE overrides the name. Then load it into the cluster (kind load docker-image IMAGE,
## minikube image load IMAGE) or push it to a registry the cluster pulls from.
CONTAINER_TOOL ?= docker
IMAGE ?= ghcr.io/redislock/redislock:$(shell sed -n 's/^appVersion: //p' charts/redislock/Chart.yaml)
image:
	$(CONTAINER_TOOL) build --build-arg VERSION=$$(sed -n 's/^appVersion: //p' charts/redislock/Chart.yaml) -t $(IMAGE) .

## lint: golangci-lint with the pinned version and .golangci.yml.
lint:
	$(GOLANGCI_LINT) run ./...

tools:
	@$(TOOLS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

redis:
	@hack/ensure-packages.sh redis-server:redis-server

## packages: what make test needs from Debian: redis-server, valkey-server (from bookworm-backports,
## for the engine's tests on Valkey), and promtool (package prometheus) for the chart's alert tests
## (apt-get when root).
packages:
	@hack/ensure-packages.sh redis-server:redis-server promtool:prometheus valkey-server:valkey-server/bookworm-backports
