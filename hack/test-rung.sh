#!/bin/sh
# test-rung.sh RUNG...: runs rungs of the test ladder (CONTRIBUTING.md),
# then says whether each passed and how long it took. With several rungs
# it runs them side by side, each one's output kept until it ends, and
# fails if any failed. The Makefile's test-* targets call it with the
# tools' paths in the environment (KUBEBUILDER_ASSETS, HELM,
# THIRD_PARTY_CRDS).
#
#   unit         go test -short: no redis-server and no API server started
#   integration  every package but test/e2e and test/cluster, and beside
#                them pkg/redislock on valkey-server
#   e2e          test/e2e, with a chaos run of CHAOS_SMOKE per deployment
#                (CHAOS_SMOKE=0: none, as in make test, whose soak rung
#                runs the same test for longer)
#   soak         SOAK_TESTS, with a chaos run of CHAOS_SOAK per deployment,
#                then make cluster-test
set -u
GOTEST=${GOTEST:-go test -race -count=1 -timeout=40m}
GO=${GO:-go}
self=$0
# The soak rung's tests, by name: each calls rung.SoakTest, but TestChaos
# and TestShardedChaos, which the e2e rung runs too, shorter
# (TestSoakTestsAreListed checks it).
SOAK_TESTS='^(TestElectionCostStaysWithinBudget|TestObtainWaitCostStaysWithinBudget|TestChaos|TestShardedChaos)$'

# beside NAME CMD NAME CMD...: runs each CMD (a shell command line, in
# which $0 is this script) side by side, its output kept in a file; prints each output, in order, once all
# have ended, and fails if any failed.
beside() {
	dir=$(mktemp -d)
	# Interrupted, it shows what each command printed so far.
	trap 'for f in "$dir"/[0-9]*; do case $f in *.rc | *.name) ;; *) [ -f "$f" ] && cat "$f" ;; esac; done; rm -rf "$dir"; exit 130' INT TERM
	trap 'rm -rf "$dir"' EXIT
	i=0
	while [ $# -gt 0 ]; do
		i=$((i + 1))
		echo "$1: started; its output follows when it ends" >&2
		(sh -c "$2" "$self" >"$dir/$i" 2>&1; echo $? >"$dir/$i.rc") &
		echo "$1" >"$dir/$i.name"
		shift 2
	done
	wait
	rc=0
	for n in $(seq 1 "$i"); do
		cat "$dir/$n"
		if [ "$(cat "$dir/$n.rc")" != 0 ]; then
			echo "$(cat "$dir/$n.name"): FAILED" >&2
			rc=1
		fi
	done
	rm -rf "$dir"
	return $rc
}

run() {
	case $1 in
	unit) $GOTEST -short -run '^Test' ./... ;;
	integration)
		# pkg/redislock, the longest, first: go test starts packages in
		# the order given.
		pkgs=$($GO list ./...) || return
		pkgs=$(echo "$pkgs" | grep -v -e /test/e2e -e /test/cluster -e '/pkg/redislock$' | tr '\n' ' ')
		beside "integration: pkg/redislock on valkey-server" \
			"REDISLOCK_RUNG=integration REDISLOCK_TEST_SERVER=valkey-server $GOTEST ./pkg/redislock/" \
			"integration: every package but test/e2e and test/cluster" \
			"REDISLOCK_RUNG=integration $GOTEST ./pkg/redislock/ $pkgs"
		;;
	e2e)
		if [ "${CHAOS_SMOKE:-15s}" = 0 ]; then
			REDISLOCK_RUNG=e2e $GOTEST -skip '^(TestChaos|TestShardedChaos)$' ./test/e2e/...
		else
			REDISLOCK_RUNG=e2e CHAOS_DURATION=${CHAOS_SMOKE:-15s} $GOTEST ./test/e2e/...
		fi
		;;
	soak)
		REDISLOCK_RUNG=soak CHAOS_DURATION=${CHAOS_SOAK:-40s} $GOTEST -run "$SOAK_TESTS" ./pkg/redislock/ ./test/e2e/ &&
			${MAKE:-make} --no-print-directory cluster-test
		;;
	*)
		echo "test-rung.sh: no rung $1: unit, integration, e2e or soak" >&2
		return 2
		;;
	esac
}

# timed RUNG: runs it and says how it went.
timed() {
	start=$(date +%s)
	run "$1"
	rc=$?
	took=$(($(date +%s) - start))
	if [ "$rc" = 0 ]; then
		echo "test-$1: passed in ${took}s" >&2
	else
		echo "test-$1: FAILED after ${took}s" >&2
	fi
	return $rc
}

[ $# -gt 0 ] || {
	echo "usage: test-rung.sh unit|integration|e2e|soak..." >&2
	exit 2
}
if [ $# = 1 ]; then
	timed "$1"
	exit
fi
# beside's arguments, NAME CMD pairs, built in place of the rungs: no eval,
# and the CMD names this script as $0, so a path with spaces or quotes in it
# stays one word.
for r in "$@"; do
	shift
	set -- "$@" "test-$r" "\"\$0\" $r"
done
beside "$@"
