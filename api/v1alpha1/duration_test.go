package v1alpha1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/api/v1alpha1"
)

// A duration Go cannot parse decodes without error, keeps its text for Err
// and writes it back unchanged, so one bad object never breaks a list.
func TestDurationDecodesWhatItCannotParse(t *testing.T) {
	var rl v1alpha1.RedisLock
	raw := `{"spec":{"ttl":"1d","renewInterval":"2s","redis":{"addrs":["r:6379"],"nodeTimeout":15}}}`
	if err := json.Unmarshal([]byte(raw), &rl); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := rl.Spec.TTL.Err(); err == nil || !strings.Contains(err.Error(), `"1d"`) || !strings.Contains(err.Error(), "unknown unit") {
		t.Fatalf("ttl 1d: Err %v; want the text and Go's reason", err)
	}
	if err := rl.Spec.Redis.NodeTimeout.Err(); err == nil {
		t.Fatal("nodeTimeout 15 (a number): no Err")
	}
	if err := rl.Spec.RenewInterval.Err(); err != nil || rl.Spec.RenewInterval.Duration != 2*time.Second {
		t.Fatalf("renewInterval 2s: %v, %v", rl.Spec.RenewInterval.Duration, err)
	}
	out, err := json.Marshal(rl.Spec)
	if err != nil || !strings.Contains(string(out), `"ttl":"1d"`) || !strings.Contains(string(out), `"renewInterval":"2s"`) {
		t.Fatalf("encode: %s, %v; want the bad text kept and 2s", out, err)
	}
	var unset *v1alpha1.Duration
	if err := unset.Err(); err != nil {
		t.Fatalf("unset: %v", err)
	}
}

// DurationPattern accepts what time.ParseDuration parses, in the range the
// rules allow, and refuses what it does not: the CRDs' rules and the Go
// types then agree on which texts are durations.
func TestDurationPatternAgreesWithParseDuration(t *testing.T) {
	re := regexp.MustCompile(v1alpha1.DurationPattern)
	for _, s := range []string{"15s", "1m30s", "500ms", "1.5h", ".5s", "8760h", "1us", "1µs", "1μs", "9ns", "1h2m3s4ms5us6ns", "007s"} {
		if _, err := time.ParseDuration(s); err != nil {
			t.Fatalf("ParseDuration(%q): %v", s, err)
		}
		if !re.MatchString(s) {
			t.Errorf("DurationPattern refuses %q, which Go parses", s)
		}
	}
	// Go refuses the first ones; the signed ones and 99999h it parses, but
	// a ttl is never negative, and the rules allow at most 8760h.
	for _, s := range []string{"", "15", "1d", "1 s", "s", "1.s.", "1e3s", "-1s", "+1s", "99999h"} {
		if re.MatchString(s) {
			t.Errorf("DurationPattern accepts %q", s)
		}
	}
}

// The pattern is written once, in DurationPattern; the rules write
// isDuration(x), and make manifests writes it out in the CRDs
// (hack/crdrules), leaving none of the shorthand behind.
func TestDurationPatternIsWrittenOnce(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	uses := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), v1alpha1.DurationPattern); n > 0 && !strings.HasSuffix(f, "_test.go") {
			uses += n
		}
	}
	if uses != 1 {
		t.Errorf("the duration pattern is written %d times in api/v1alpha1; want once, in DurationPattern (the rules write isDuration(x))", uses)
	}
	crds, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	for _, f := range crds {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "isDuration(") {
			t.Errorf("%s still has isDuration(...), which no CEL library has; run make manifests", f)
		}
	}
}
