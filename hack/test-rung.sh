#!/bin/sh
# test-rung.sh RUNG: runs one rung of the test ladder (CONTRIBUTING.md),
# then says whether it passed and how long it took. The Makefile's test-*
# targets call it with the tools' paths in the environment
# (KUBEBUILDER_ASSETS, HELM, THIRD_PARTY_CRDS).
#
#   unit         go test -short: no redis-server and no API server started
#   integration  every package but test/e2e and test/cluster, and beside
#                them pkg/redislock on valkey-server
#   e2e          test/e2e, with a chaos run of CHAOS_SMOKE per deployment
#   soak         SOAK_TESTS, with a chaos run of CHAOS_SOAK per deployment,
#                then make cluster-test
set -u
rung=${1:?usage: test-rung.sh unit|integration|e2e|soak}
GOTEST=${GOTEST:-go test -race -count=1 -timeout=40m}
GO=${GO:-go}
# The soak rung's tests, by name: each calls rung.SoakTest, but TestChaos,
# which the e2e rung runs too, shorter (TestSoakTestsAreListed checks it).
SOAK_TESTS='^(TestElectionCostStaysWithinBudget|TestObtainWaitCostStaysWithinBudget|TestChaos)$'

integration() {
	# pkg/redislock, the longest, first: go test starts packages in the
	# order given. Its Valkey run goes beside the others; its lines are
	# shown after theirs, each starting with "valkey:".
	valkey=$(mktemp)
	{ REDISLOCK_RUNG=integration REDISLOCK_TEST_SERVER=valkey-server $GOTEST ./pkg/redislock/ 2>&1; echo "exit $?"; } |
		sed 's/^/valkey: /' >"$valkey" &
	REDISLOCK_RUNG=integration $GOTEST ./pkg/redislock/ $($GO list ./... | grep -v -e /test/e2e -e /test/cluster -e '/pkg/redislock$')
	rc=$?
	wait
	cat "$valkey"
	grep -qx 'valkey: exit 0' "$valkey" || rc=1
	rm -f "$valkey"
	return $rc
}

start=$(date +%s)
case $rung in
unit) $GOTEST -short -run '^Test' ./... ;;
integration) integration ;;
e2e) REDISLOCK_RUNG=e2e CHAOS_DURATION=${CHAOS_SMOKE:-15s} $GOTEST ./test/e2e/... ;;
soak)
	REDISLOCK_RUNG=soak CHAOS_DURATION=${CHAOS_SOAK:-40s} $GOTEST -run "$SOAK_TESTS" ./pkg/redislock/ ./test/e2e/ &&
		${MAKE:-make} --no-print-directory cluster-test
	;;
*)
	echo "test-rung.sh: no rung $rung: unit, integration, e2e or soak" >&2
	exit 2
	;;
esac
rc=$?
took=$(($(date +%s) - start))
if [ "$rc" = 0 ]; then
	echo "test-$rung: passed in ${took}s" >&2
else
	echo "test-$rung: FAILED after ${took}s" >&2
fi
exit "$rc"
