// Package rung places tests on the rungs of the test ladder that
// CONTRIBUTING.md describes and the Makefile runs, fastest first:
//
//   - unit (make test-unit: go test -short): pure logic, the chart's
//     renders, the docs and layout checks; no redis-server, no API server;
//   - integration (make test-integration): real redis-servers and envtest;
//   - e2e (make test-e2e): test/e2e, the controller, agents and webhook
//     end to end, and a short chaos run;
//   - soak (make test-soak): the tests that count over long windows and
//     the full chaos lengths, and the real single-node cluster.
//
// A plain go test, without -short and without REDISLOCK_RUNG, runs every
// rung's tests.
package rung

import (
	"flag"
	"os"
	"testing"
)

// Env names the rung a run is for (integration, e2e or soak); unset, a
// run is for every rung. The unit rung is go test -short.
const Env = "REDISLOCK_RUNG"

// Soak is the value of Env for the soak rung.
const Soak = "soak"

// NeedServers skips t in the unit rung (go test -short), which starts no
// redis-server and no API server. Every helper that starts one calls it,
// so that a test is on the unit rung exactly when it starts none.
func NeedServers(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("unit rung (go test -short): this test needs a redis-server or an API server")
	}
}

// SoakTest marks t as a soak test: it runs in the soak rung and in a
// plain go test, and is skipped in a run for another rung. The soak rung
// selects its tests by name (SOAK_TESTS in hack/test-rung.sh), and a test checks
// that every test that calls SoakTest is in that list.
func SoakTest(t testing.TB) {
	t.Helper()
	NeedServers(t)
	if r := os.Getenv(Env); r != "" && r != Soak {
		t.Skipf("%s=%s: a soak test, run by make test-soak", Env, r)
	}
}

// Servers reports, from a TestMain, whether this run may start servers:
// false in the unit rung. It parses the test flags if m.Run has not yet.
func Servers() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return !testing.Short()
}
