package v1alpha1_test

import (
	"encoding/json"
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
