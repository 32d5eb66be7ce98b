package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// The RedisLock CRD's rules, as kubectl users meet them on the real API
// server: it stores only durations and addresses the code can read, it
// refuses edits that would move a live lock to another key or other
// servers, and its messages name the field, say in words what is wanted,
// and show the values a cross-field rule compared.

// spec is a RedisLock spec (or part of one) as JSON.
type spec = map[string]any

// applySpec applies, in ns, a RedisLock called name with spec s, and returns
// kubectl's output and error.
func applySpec(t *testing.T, ns, name string, s spec) (string, error) {
	t.Helper()
	manifest, err := json.Marshal(map[string]any{
		"apiVersion": "redislock.io/v1alpha1",
		"kind":       "RedisLock",
		"metadata":   map[string]any{"name": name},
		"spec":       s,
	})
	if err != nil {
		t.Fatal(err)
	}
	return kubectlIn(t, string(manifest), "apply", "-n", ns, "-f", "-")
}

// standalone returns a spec on one Redis server with the fields in extra.
func standalone(extra spec) spec {
	s := spec{"redis": spec{"addrs": []string{"redis.redis.svc:6379"}}}
	maps.Copy(s, extra)
	return s
}

// blockingLine is what the API server adds when a schema error (wrong type,
// missing field, enum) kept it from running the CEL rules.
const blockingLine = "some validation rules were not checked"

// rejections returns the errors of a rejection as kubectl prints them, one
// per element: "spec.ttl: Invalid value: ...".
func rejections(out string) []string {
	_, after, ok := strings.Cut(out, " is invalid: ")
	if !ok {
		return nil
	}
	after = strings.TrimSpace(after)
	if !strings.HasPrefix(after, "* ") {
		return []string{after}
	}
	var errs []string
	for _, line := range strings.Split(after, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "* ") {
			errs = append(errs, strings.TrimPrefix(line, "* "))
		}
	}
	return errs
}

// wantRejected fails t unless kubectl's out and err are a rejection by
// validation with exactly one error (so no blockingLine either), which
// contains every string of want.
func wantRejected(t *testing.T, out string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a rejection saying %q:\n%s", want, out)
	}
	errs := rejections(out)
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want one saying %q:\n%s", len(errs), want, out)
	}
	for _, w := range want {
		if !strings.Contains(errs[0], w) {
			t.Fatalf("the rejection lacks %q:\n%s", w, out)
		}
	}
	t.Logf("rejected: %s", errs[0])
}

// wantAccepted fails t unless kubectl succeeded.
func wantAccepted(t *testing.T, out string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("rejected: %v\n%s", err, out)
	}
}

// mustApplySpec is applySpec, failing t if the spec is rejected.
func mustApplySpec(t *testing.T, ns, name string, s spec) {
	t.Helper()
	out, err := applySpec(t, ns, name, s)
	wantAccepted(t, out, err)
}

// durationField is one duration field of the spec.
type durationField struct {
	// name is the field's name as its messages say it; path is its path.
	name, path string
	// set puts v into the field of s.
	set func(s spec, v any)
}

var durationFields = []durationField{
	{"ttl", "spec.ttl", func(s spec, v any) { s["ttl"] = v }},
	{"renewInterval", "spec.renewInterval", func(s spec, v any) { s["renewInterval"] = v }},
	{"renewDeadline", "spec.renewDeadline", func(s spec, v any) { s["renewDeadline"] = v }},
	{"nodeTimeout", "spec.redis.nodeTimeout", func(s spec, v any) { s["redis"].(spec)["nodeTimeout"] = v }},
}

// Every duration field takes only what Go's time.ParseDuration reads, from
// 1ms to 8760h; anything else is refused with one error that names the
// field, and without the API server's "rules were not checked" line.
func TestDurationFieldsTakeOnlyGoDurations(t *testing.T) {
	ns := newNamespace(t)
	rejected := []string{
		"1d", "15 s", "1hour", "2 weeks", "1sec", "100milli", // not Go durations
		"3000000h", "8761h", "-15s", "0s", "500us", // out of range
		"15", "", "1h 30m", "1.5.5s", "s", ".s", // no unit, or malformed
	}
	for _, f := range durationFields {
		for i, v := range rejected {
			t.Run(f.name+"="+v, func(t *testing.T) {
				t.Parallel()
				s := standalone(nil)
				f.set(s, v)
				out, err := applySpec(t, ns, fmt.Sprintf("bad-%s-%d", strings.ToLower(f.name), i), s)
				wantRejected(t, out, err, fmt.Sprintf("%s: Invalid value: %q: %s must be a duration", f.path, v, f.name))
			})
		}
	}
	// nodeTimeout is at most redislock.MaxNodeTimeout (5s), so that a
	// server that never answers holds a controller worker only that long.
	for _, v := range []string{"5001ms", "14s", "1h"} {
		t.Run("nodeTimeout="+v, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, "bad-nodetimeout-max-"+strings.ToLower(v), standalone(spec{"ttl": "2h", "redis": spec{"addrs": []string{"redis:6379"}, "nodeTimeout": v}}))
			wantRejected(t, out, err, fmt.Sprintf(`spec.redis.nodeTimeout: Invalid value: %q: nodeTimeout must be a duration from 1ms to 5s`, v))
		})
	}
	// ttl is also a whole number of milliseconds, as Redis keeps it.
	t.Run("ttl=15000500us", func(t *testing.T) {
		t.Parallel()
		out, err := applySpec(t, ns, "bad-ttl-us", standalone(spec{"ttl": "15000500us"}))
		wantRejected(t, out, err, `spec.ttl: Invalid value: "15000500us": ttl must be a duration in whole milliseconds`)
	})
}

// A number without quotes is a JSON integer, not a string: the schema's
// type check refuses it and says so, and the API server adds that it ran no
// rule (as the README says).
func TestDurationGivenAsAnIntegerIsRefusedAsNotAString(t *testing.T) {
	ns := newNamespace(t)
	for _, f := range durationFields {
		t.Run(f.name, func(t *testing.T) {
			s := standalone(nil)
			f.set(s, 15)
			out, err := applySpec(t, ns, "int-"+strings.ToLower(f.name), s)
			if err == nil {
				t.Fatalf("accepted %s: 15:\n%s", f.name, out)
			}
			for _, want := range []string{fmt.Sprintf(`%s: Invalid value: "integer": %s in body must be of type string`, f.path, f.path), blockingLine} {
				if !strings.Contains(out, want) {
					t.Fatalf("the rejection lacks %q:\n%s", want, out)
				}
			}
			t.Logf("rejected: %s", strings.TrimSpace(out))
		})
	}
}

// The spellings Go reads are all taken, in every unit.
func TestDurationFieldsTakeGoSpellings(t *testing.T) {
	ns := newNamespace(t)
	accepted := map[string][]string{
		"ttl":           {"15s", "1m30s", "1.5h", "0.25m", "15000ms", "8760h", "1s", "5s", "015s", "7.5s"},
		"renewInterval": {"2s", "1.5s", "1500ms", "1500000us", "1500000µs", "1500000μs", "1500000000ns", ".5s", "1s500ms"},
		"renewDeadline": {"10s", "9.5s", "9500ms", "0.1m", "5s"},
		"nodeTimeout":   {"200ms", "0.2s", "200000us", "1ms", "5s"},
	}
	for _, f := range durationFields {
		for i, v := range accepted[f.name] {
			t.Run(f.name+"="+v, func(t *testing.T) {
				t.Parallel()
				s := standalone(nil)
				f.set(s, v)
				out, err := applySpec(t, ns, fmt.Sprintf("ok-%s-%d", strings.ToLower(f.name), i), s)
				wantAccepted(t, out, err)
			})
		}
	}
}

// A user who sets only ttl gets renewInterval and renewDeadline derived
// from it (2/15 and 2/3 of it, as the lock engine does): the API server
// accepts the spec and leaves both fields unset rather than filling in
// fixed values that a short ttl would break.
func TestTTLAloneIsAcceptedAndRenewTimingIsLeftToIt(t *testing.T) {
	ns := newNamespace(t)
	for _, ttl := range []string{"5s", "1s", "2h"} {
		t.Run(ttl, func(t *testing.T) {
			name := "ttl-" + strings.ToLower(ttl)
			mustApplySpec(t, ns, name, standalone(spec{"ttl": ttl}))
			var got struct {
				Spec map[string]any `json:"spec"`
			}
			out := mustKubectl(t, "get", "redislock", name, "-n", ns, "-o", "json")
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec["ttl"] != ttl {
				t.Errorf("spec.ttl = %v, want %s", got.Spec["ttl"], ttl)
			}
			for _, f := range []string{"renewInterval", "renewDeadline"} {
				if v, ok := got.Spec[f]; ok {
					t.Errorf("spec.%s = %v, want it unset (derived from ttl)", f, v)
				}
			}
		})
	}
}

// Cross-field rules compare effective values (a renew field left unset is
// derived from ttl) and say which values they compared.
func TestTimingRulesShowTheValuesCompared(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name string
		spec spec
		want []string
	}{
		{"interval against derived deadline", standalone(spec{"ttl": "5s", "renewInterval": "4s"}),
			[]string{"spec.renewInterval: Invalid value", "renewInterval 4s must be shorter than renewDeadline (unset: 2/3 of ttl 5s)"}},
		{"derived interval against deadline", standalone(spec{"ttl": "15s", "renewDeadline": "1s"}),
			[]string{"spec.renewInterval: Invalid value", "renewInterval (unset: 2/15 of ttl 15s) must be shorter than renewDeadline 1s"}},
		{"interval against deadline", standalone(spec{"renewInterval": "5s", "renewDeadline": "5s"}),
			[]string{"spec.renewInterval: Invalid value", "renewInterval 5s must be shorter than renewDeadline 5s"}},
		{"deadline against ttl", standalone(spec{"ttl": "15s", "renewDeadline": "20s"}),
			[]string{"spec.renewDeadline: Invalid value", "renewDeadline 20s must be shorter than ttl 15s"}},
		{"deadline within the drift allowance", standalone(spec{"ttl": "10s", "renewInterval": "1s", "renewDeadline": "9.9s"}),
			[]string{"spec.renewDeadline: Invalid value", "renewDeadline 9.9s must be shorter than ttl 10s less the allowance for clock drift, 1% of ttl + 2ms"}},
		{"derived deadline of a tiny ttl", standalone(spec{"ttl": "5ms", "redis": spec{"addrs": []string{"redis:6379"}, "nodeTimeout": "1ms"}}),
			[]string{"spec.renewDeadline: Invalid value", "renewDeadline (unset: 2/3 of ttl 5ms) must be shorter than ttl 5ms less"}},
		{"node timeout against ttl", standalone(spec{"ttl": "1s", "redis": spec{"addrs": []string{"redis:6379"}, "nodeTimeout": "1s"}}),
			[]string{"spec.redis.nodeTimeout: Invalid value", "redis.nodeTimeout 1s must be shorter than ttl 1s"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("timing-%d", i), tt.spec)
			wantRejected(t, out, err, tt.want...)
		})
	}
}

// One rule for timing everywhere: the API server accepts a spec's timing
// exactly when the lock engine does (Client.CheckTiming on the Timing that
// pkg/redisconn reads from the spec, with the spec's nodeTimeout), on
// either side of each rule's boundary.
func TestAPIServerAndEngineAgreeOnTiming(t *testing.T) {
	ns := newNamespace(t)
	tests := []spec{
		{"ttl": "5s"}, {"ttl": "1s"}, {"ttl": "8760h"},
		// Derived renewDeadline (2/3 of ttl) against the drift allowance.
		{"ttl": "7ms", "nodeTimeout": "1ms"}, {"ttl": "6ms", "nodeTimeout": "1ms"},
		// renewDeadline against ttl less 1% and 2ms: 9.898s for 10s.
		{"ttl": "10s", "renewDeadline": "9.897s"}, {"ttl": "10s", "renewDeadline": "9.898s"},
		// renewInterval against the derived renewDeadline, 10s of 15s.
		{"ttl": "15s", "renewInterval": "9.999s"}, {"ttl": "15s", "renewInterval": "10s"},
		// The derived renewInterval, 2s of 15s, against renewDeadline.
		{"ttl": "15s", "renewDeadline": "2001ms"}, {"ttl": "15s", "renewDeadline": "2s"},
		{"ttl": "1s", "nodeTimeout": "999ms"}, {"ttl": "1s", "nodeTimeout": "1s"},
		{"ttl": "15000500us"}, {"ttl": "15001ms"},
	}
	for i, timing := range tests {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(timing), "map["), "]"), func(t *testing.T) {
			t.Parallel()
			s := standalone(nil)
			for k, v := range timing {
				if k == "nodeTimeout" {
					s["redis"].(spec)[k] = v
				} else {
					s[k] = v
				}
			}
			out, err := applySpec(t, ns, fmt.Sprintf("agree-%d", i), s)
			apiAccepts := err == nil
			engineErr := engineCheck(t, s)
			if apiAccepts != (engineErr == nil) {
				t.Fatalf("the API server accepts it: %v (%s); the engine: %v", apiAccepts, strings.TrimSpace(out), engineErr)
			}
			t.Logf("API server accepts: %v; engine: %v", apiAccepts, engineErr)
		})
	}
}

// engineCheck reads s as the controller, plugin and agent do (redisconn)
// and returns what the lock engine's CheckTiming says of it.
func engineCheck(t *testing.T, s spec) error {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{}
	if err := json.Unmarshal(raw, &rl.Spec); err != nil {
		t.Fatal(err)
	}
	cfg, err := redisconn.Resolve(context.Background(), nil, rl)
	if err != nil {
		t.Fatal(err)
	}
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = node.Close() })
	c, err := redislock.New([]redis.UniversalClient{node}, &redislock.Options{NodeTimeout: cfg.NodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return c.CheckTiming(redisconn.Timing(rl))
}

// Each address is host:port with a port from 1 to 65535, and the message
// says so in words.
func TestAddressesNeedHostAndPort(t *testing.T) {
	ns := newNamespace(t)
	const want = "must be host:port, with a port from 1 to 65535"
	for i, addr := range []string{"redis:0", "redis:70000", "redis:65536", "redis:00000", "redis:", "redis", ":6379",
		"redis://redis:6379", "user@redis:6379", "redis:6379/0", "[::1]:0", "::1:6379", "redis :6379"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("bad-addr-%d", i), spec{"redis": spec{"addrs": []string{addr}}})
			wantRejected(t, out, err, fmt.Sprintf("spec.redis.addrs[0]: Invalid value: %q: each address %s", addr, want))
		})
	}
	for i, addr := range []string{"redis:1", "redis:65535", "redis.redis.svc:6379", "REDIS.redis.svc:6379", "10.0.0.7:6379",
		"[::1]:6379", "[fd00::7]:26379", "redis-0.redis_headless.svc.cluster.local:6379"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("ok-addr-%d", i), spec{"redis": spec{"addrs": []string{addr}}})
			wantAccepted(t, out, err)
		})
	}
}

// Host names are compared without case: two spellings of one host are one
// server, which Redlock would otherwise count twice towards its majority.
func TestAddressesDifferingOnlyInCaseAreDuplicates(t *testing.T) {
	ns := newNamespace(t)
	redlock := func(addrs ...string) spec { return spec{"redis": spec{"mode": "Redlock", "addrs": addrs}} }
	out, err := applySpec(t, ns, "case-dup", redlock("redis-a.redis.svc:6379", "REDIS-A.redis.svc:6379", "redis-b.redis.svc:6379"))
	wantRejected(t, out, err, "spec.redis.addrs: Invalid value",
		"redis-a.redis.svc:6379 and REDIS-A.redis.svc:6379 name the same server")
	out, err = applySpec(t, ns, "case-dup-ipv6", redlock("[fd00::a]:6379", "[FD00::A]:6379", "[fd00::b]:6379"))
	wantRejected(t, out, err, "[fd00::a]:6379 and [FD00::A]:6379 name the same server")
	// The same host on other ports is other servers.
	out, err = applySpec(t, ns, "ports", redlock("redis.redis.svc:6379", "REDIS.redis.svc:6380", "redis.redis.svc:6381"))
	wantAccepted(t, out, err)
}

// The fields that decide a lock's key and servers cannot change on a live
// lock: candidates read them once, so a change would let one that started
// before it and one that started after it lead at once. The refusal names
// the field and says to create a new RedisLock. Other fields may change.
func TestKeyAndServerFieldsAreImmutable(t *testing.T) {
	ns := newNamespace(t)
	sentinel := spec{"redis": spec{"mode": "Sentinel", "masterName": "mymaster", "addrs": []string{"sentinel-0:26379", "sentinel-1:26379"}}}
	redlock := spec{"redis": spec{"mode": "Redlock", "addrs": []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"}}}
	one := func(addr string) spec { return spec{"redis": spec{"addrs": []string{addr}}} }
	with := func(base, extra spec) spec {
		s := maps.Clone(base)
		maps.Copy(s, extra)
		return s
	}
	refused := []struct {
		name string
		// object is the RedisLock's name; empty, one made up from the case.
		object       string
		before, edit spec
		want         []string
	}{
		{"lockName changed", "", with(one("redis:6379"), spec{"lockName": "v1"}), with(one("redis:6379"), spec{"lockName": "v2"}),
			[]string{"spec.lockName: Invalid value", "lockName cannot be changed", `from "v1" to "v2"`}},
		{"lockName set where it was unset", "", one("redis:6379"), with(one("redis:6379"), spec{"lockName": "other"}),
			[]string{"spec.lockName: Invalid value", "lockName cannot be changed", `from unset to "other"`}},
		{"lockName unset", "", with(one("redis:6379"), spec{"lockName": "v1"}), one("redis:6379"),
			[]string{"spec.lockName: Invalid value", "lockName cannot be changed", `from "v1" to unset`}},
		// An unset lockName means the object's name, so these two keep the
		// key; they are refused all the same, which keeps the rule simple
		// (and the API server cannot afford to compare with metadata.name).
		{"lockName set to the object's name", "own-name-set", one("redis:6379"), with(one("redis:6379"), spec{"lockName": "own-name-set"}),
			[]string{"spec.lockName: Invalid value", "lockName cannot be changed", `from unset to "own-name-set"`}},
		{"lockName unset where it was the object's name", "own-name-unset", with(one("redis:6379"), spec{"lockName": "own-name-unset"}), one("redis:6379"),
			[]string{"spec.lockName: Invalid value", "lockName cannot be changed", `from "own-name-unset" to unset`}},
		{"scope", "", with(one("redis:6379"), spec{"lockName": "shared"}), with(one("redis:6379"), spec{"scope": "Global", "lockName": "shared"}),
			[]string{"spec.scope: Invalid value", "scope cannot be changed", "from Cluster to Global"}},
		{"scope back to Cluster", "", with(one("redis:6379"), spec{"scope": "Global", "lockName": "shared"}), with(one("redis:6379"), spec{"scope": "Cluster", "lockName": "shared"}),
			[]string{"spec.scope: Invalid value", "scope cannot be changed", "from Global to Cluster"}},
		{"mode", "", one("redis:6379"), spec{"redis": spec{"mode": "Cluster", "addrs": []string{"redis:6379"}}},
			[]string{"spec.redis.mode: Invalid value", "mode cannot be changed"}},
		{"addrs", "", one("redis-a:6379"), one("redis-b:6379"),
			[]string{"spec.redis.addrs: Invalid value", "addrs cannot be changed"}},
		{"addrs, one Redlock node replaced", "", redlock, spec{"redis": spec{"mode": "Redlock", "addrs": []string{"redis-a:6379", "redis-b:6379", "redis-d:6379"}}},
			[]string{"spec.redis.addrs: Invalid value", "addrs cannot be changed"}},
		{"masterName", "", sentinel, spec{"redis": spec{"mode": "Sentinel", "masterName": "other", "addrs": []string{"sentinel-0:26379", "sentinel-1:26379"}}},
			[]string{"spec.redis.masterName: Invalid value", "masterName cannot be changed"}},
		{"db", "", one("redis:6379"), spec{"redis": spec{"addrs": []string{"redis:6379"}, "db": 1}},
			[]string{"spec.redis.db: Invalid value", "db cannot be changed"}},
	}
	for i, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := tt.object
			if name == "" {
				name = fmt.Sprintf("immutable-%d", i)
			}
			mustApplySpec(t, ns, name, tt.before)
			before := mustKubectl(t, "get", "redislock", name, "-n", ns, "-o", "jsonpath={.spec}")
			out, err := applySpec(t, ns, name, tt.edit)
			wantRejected(t, out, err, append(tt.want, "create a new RedisLock")...)
			if after := mustKubectl(t, "get", "redislock", name, "-n", ns, "-o", "jsonpath={.spec}"); after != before {
				t.Errorf("the refused edit changed the spec:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	allowed := []struct {
		name         string
		before, edit spec
	}{
		{"Redlock nodes reordered", redlock, spec{"redis": spec{"mode": "Redlock", "addrs": []string{"redis-c:6379", "redis-a:6379", "redis-b:6379"}}}},
		{"timing", one("redis:6379"), with(one("redis:6379"), spec{"ttl": "20s", "renewInterval": "3s"})},
		{"deletionPolicy", one("redis:6379"), with(one("redis:6379"), spec{"deletionPolicy": "Release"})},
		{"nodeTimeout and password", one("redis:6379"), spec{"redis": spec{"addrs": []string{"redis:6379"}, "nodeTimeout": "100ms",
			"passwordSecretRef": spec{"name": "redis-auth", "key": "password"}}}},
	}
	for i, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("allowed-%d", i)
			mustApplySpec(t, ns, name, tt.before)
			mustApplySpec(t, ns, name, tt.edit)
		})
	}
}

// The Sentinels' credentials are for Sentinel mode alone, and a Sentinel
// username needs its password; each refusal names the field.
func TestSentinelCredentialsOnlyInSentinelMode(t *testing.T) {
	ns := newNamespace(t)
	ref := spec{"name": "redis-auth", "key": "sentinel"}
	sentinel := func(extra spec) spec {
		r := spec{"mode": "Sentinel", "masterName": "mymaster", "addrs": []string{"sentinel-0:26379"}}
		maps.Copy(r, extra)
		return spec{"redis": r}
	}
	for i, tt := range []struct {
		name string
		s    spec
		want []string
	}{
		{"password outside Sentinel mode", spec{"redis": spec{"addrs": []string{"redis:6379"}, "sentinelPasswordSecretRef": ref}},
			[]string{"spec.redis.sentinelPasswordSecretRef: Invalid value", "sentinelPasswordSecretRef is allowed only in Sentinel mode"}},
		{"username outside Sentinel mode", spec{"redis": spec{"mode": "Redlock", "addrs": []string{"redis:6379"}, "sentinelUsernameSecretRef": ref}},
			[]string{"spec.redis.sentinelUsernameSecretRef: Invalid value", "sentinelUsernameSecretRef is allowed only in Sentinel mode"}},
		{"username without password", sentinel(spec{"sentinelUsernameSecretRef": ref}),
			[]string{"spec.redis.sentinelUsernameSecretRef: Invalid value", "sentinelUsernameSecretRef needs sentinelPasswordSecretRef"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("refused-%d", i), tt.s)
			wantRejected(t, out, err, tt.want...)
		})
	}
	out, err := applySpec(t, ns, "password", sentinel(spec{"sentinelPasswordSecretRef": ref}))
	wantAccepted(t, out, err)
	out, err = applySpec(t, ns, "username-and-password", sentinel(spec{"sentinelUsernameSecretRef": ref, "sentinelPasswordSecretRef": ref}))
	wantAccepted(t, out, err)
}

// insecureSkipVerify turns off the checks that caSecretRef and serverName
// configure, so it takes neither; a client certificate goes with either.
func TestInsecureSkipVerifyExcludesCAAndServerName(t *testing.T) {
	ns := newNamespace(t)
	withTLS := func(tls spec) spec { return spec{"redis": spec{"addrs": []string{"redis:6379"}, "tls": tls}} }
	ca := spec{"name": "redis-tls", "key": "ca.crt"}
	cert := spec{"name": "redis-client-tls"}
	const want = "insecureSkipVerify turns off the checks that caSecretRef and serverName configure"
	type tlsCase struct {
		name string
		tls  spec
	}
	for i, tt := range []tlsCase{
		{"with caSecretRef", spec{"insecureSkipVerify": true, "caSecretRef": ca}},
		{"with serverName", spec{"insecureSkipVerify": true, "serverName": "redis.example.com"}},
		{"with both and a client certificate", spec{"insecureSkipVerify": true, "caSecretRef": ca, "serverName": "redis.example.com", "certSecretRef": cert}},
	} {
		t.Run("refused "+tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("refused-%d", i), withTLS(tt.tls))
			wantRejected(t, out, err, "spec.redis.tls.insecureSkipVerify: Invalid value", want)
		})
	}
	for i, tt := range []tlsCase{
		{"alone", spec{"insecureSkipVerify": true}},
		{"with a client certificate", spec{"insecureSkipVerify": true, "certSecretRef": cert}},
		{"false, with caSecretRef and serverName", spec{"insecureSkipVerify": false, "caSecretRef": ca, "serverName": "redis.example.com"}},
		{"unset, a CA and a client certificate", spec{"caSecretRef": ca, "certSecretRef": cert}},
	} {
		t.Run("accepted "+tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := applySpec(t, ns, fmt.Sprintf("accepted-%d", i), withTLS(tt.tls))
			wantAccepted(t, out, err)
		})
	}
	out, err := applySpec(t, ns, "cert-without-name", withTLS(spec{"certSecretRef": spec{}}))
	if err == nil || !strings.Contains(out, "spec.redis.tls.certSecretRef.name: Required value") {
		t.Fatalf("a certSecretRef without a name: %v\n%s", err, out)
	}
}

// A lock is scoped to its cluster unless it says otherwise; a Global one
// needs the name the clusters share.
func TestScopeIsClusterByDefaultAndGlobalNeedsAName(t *testing.T) {
	ns := newNamespace(t)
	mustApplySpec(t, ns, "default-scope", standalone(nil))
	if got := mustKubectl(t, "get", "redislock", "default-scope", "-n", ns, "-o", "jsonpath={.spec.scope}"); got != "Cluster" {
		t.Fatalf("scope %q by default; want Cluster", got)
	}
	global := standalone(nil)
	global["scope"] = "Global"
	out, err := applySpec(t, ns, "global-unnamed", global)
	wantRejected(t, out, err, "spec.lockName: Invalid value", "scope Global needs lockName")
	global["lockName"] = "orders"
	out, err = applySpec(t, ns, "global-named", global)
	wantAccepted(t, out, err)
	out, err = applySpec(t, ns, "other-scope", spec{"scope": "Namespace", "redis": spec{"addrs": []string{"redis:6379"}}})
	// A schema error: the API server adds blockingLine.
	if err == nil || !strings.Contains(out, `spec.scope: Unsupported value: "Namespace": supported values: "Cluster", "Global"`) {
		t.Fatalf("scope Namespace: %v\n%s\nwant it refused, naming the supported values", err, out)
	}
}

// kubectl get -o wide shows the timing the candidates use, from
// status.effectiveTiming, which the controller fills in.
func TestWideOutputShowsEffectiveTiming(t *testing.T) {
	ns := newNamespace(t)
	mustApplySpec(t, ns, "effective", standalone(spec{"ttl": "5s"}))
	mustKubectl(t, "patch", "redislock", "effective", "-n", ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"effectiveTiming":{"ttl":"5s","renewInterval":"666.666666ms","renewDeadline":"3.333333333s"}}}`)
	row := getWide(t, ns)["effective"]
	if row["TTL"] != "5s" || row["RENEWINTERVAL"] != "666.666666ms" || row["RENEWDEADLINE"] != "3.333333333s" {
		t.Fatalf("row %v; want TTL 5s, RENEWINTERVAL 666.666666ms, RENEWDEADLINE 3.333333333s", row)
	}
}

// The controller runs a lock that sets only ttl: the engine derives the
// renew timing, and the lock is Ready.
func TestControllerRunsALockThatSetsOnlyTTL(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	startController(t, nil)
	ns := newNamespace(t)
	mustApplySpec(t, ns, "ttl-only", spec{"ttl": "5s", "redis": spec{"addrs": []string{s.Addr}}})
	var cond string
	waitUntil(t, 30*time.Second, "RedisLock ttl-only Ready=True", func() bool {
		cond, _ = kubectl(t, "get", "-n", ns, "redislock", "ttl-only", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")]}`)
		return strings.Contains(cond, `"status":"True"`)
	})
	t.Logf("Ready: %s", cond)
}
