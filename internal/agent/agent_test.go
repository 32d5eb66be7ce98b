package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/pkg/redislock"
)

func TestNewRejectsEachBrokenRule(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	lock := types.NamespacedName{Namespace: "shop", Name: "worker"}
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Lock: types.NamespacedName{Namespace: "shop"}, Identity: "a"}, "Lock.Name: required"},
		{Options{Lock: types.NamespacedName{Namespace: "shop", Name: "Bad_Name"}, Identity: "a"}, `Lock.Name: "Bad_Name" is not a RedisLock name`},
		{Options{Lock: types.NamespacedName{Name: "worker"}, Identity: "a"}, "Lock.Namespace: required"},
		{Options{Lock: types.NamespacedName{Namespace: "shop.x", Name: "worker"}, Identity: "a"}, `Lock.Namespace: "shop.x" is not a namespace`},
		{Options{Lock: lock}, "Identity: required"},
		{Options{Lock: lock, Identity: "a", Command: []string{"true"}, OnLost: "maybe"}, `OnLost: "maybe": want exit or campaign`},
		{Options{Lock: lock, Identity: "a", OnLost: OnLostCampaign}, "OnLost: set without a command"},
		{Options{Lock: lock, Identity: "a", MaxConnections: -1}, "MaxConnections: -1: want at least 1"},
		{Options{Lock: lock, Identity: "a", MaxLongPolls: -1}, "MaxLongPolls: -1: want at least 1"},
		{Options{Lock: lock, Identity: "a", MaxConnections: 100}, "MaxLongPolls: 128: want fewer than the connection cap (100)"},
		{Options{Lock: lock, Identity: "a", MaxConnections: 10, MaxLongPolls: 10}, "MaxLongPolls: 10: want fewer than the connection cap (10)"},
		{Options{Lock: lock, Identity: "a", Health: "Ready"}, `Health: healthprobe: invalid health signal "Ready": want http://HOST:PORT/PATH`},
		{Options{Lock: lock, Identity: "a", Health: "ready", HealthPeriod: time.Second}, "HealthPeriod: set with the signal ready, which the agent watches rather than checks"},
		{Options{Lock: lock, Identity: "a", HealthPeriod: time.Second}, "HealthPeriod: set without a health signal"},
		{Options{Lock: lock, Identity: "a", Health: "file:/ready", HealthPeriod: -time.Second}, "HealthPeriod: -1s is negative"},
		{Options{Lock: lock, Identity: "a", StepDownAfter: time.Second}, "StepDownAfter: set without a health signal"},
		{Options{Lock: lock, Identity: "a", Health: "file:/ready", StepDownAfter: -time.Second}, "StepDownAfter: -1s is negative"},
	}
	for _, tc := range cases {
		_, err := New(cfg, tc.o)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions saying %q", tc.o, err, tc.want)
		}
	}
	a, err := New(cfg, Options{Lock: lock, Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if a.o.Addr != agentflags.DefaultHTTPAddress || a.o.ProbeAddr != "" || a.o.MaxConnections != DefaultMaxConnections || a.o.MaxLongPolls != DefaultMaxLongPolls {
		t.Errorf("default Addr %q, ProbeAddr %q, MaxConnections %d, MaxLongPolls %d; want %q, none, %d, %d",
			a.o.Addr, a.o.ProbeAddr, a.o.MaxConnections, a.o.MaxLongPolls, agentflags.DefaultHTTPAddress, DefaultMaxConnections, DefaultMaxLongPolls)
	}
	// Before it campaigns, the agent does not lead and says why.
	st := a.status()
	if st.Leading || st.Error != "starting" || st.Lock != "shop/worker" || st.Identity != "a" {
		t.Errorf("status before campaigning: %+v", st)
	}
}

// The leader file is replaced whole: a reader never sees a part, and no
// temporary file is left behind.
func TestWriteStatusReplacesTheFileWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leader.json")
	until := time.Now().Add(time.Second)
	// A reader racing the writes must always find whole JSON.
	stop, torn := make(chan struct{}), make(chan string, 1)
	go func() {
		defer close(torn)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				continue // not written yet
			}
			var st leaderhttp.Status
			if json.Unmarshal(b, &st) != nil {
				torn <- string(b)
				return
			}
		}
	}()
	for i := range 200 {
		want := leaderhttp.Status{Leading: i%2 == 0, Identity: "a", Lock: "ns/l", FencingToken: int64(i), ValidUntil: &until, ObservedAt: time.Now()}
		if err := writeStatus(path, want); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got leaderhttp.Status
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("file %q: %v", b, err)
		}
		if got.Leading != want.Leading || got.FencingToken != want.FencingToken {
			t.Fatalf("file says %+v, want %+v", got, want)
		}
	}
	close(stop)
	if b, ok := <-torn; ok {
		t.Fatalf("a reader saw a partial file: %q", b)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only leader.json", len(entries))
	}
	if err := writeStatus(filepath.Join(dir, "missing", "leader.json"), leaderhttp.Status{}); err == nil || !strings.Contains(err.Error(), "agent: leader file") {
		t.Errorf("write into a missing directory: %v, want an agent: leader file error", err)
	}
}

// /leader tells an outage from a healthy standby: the elector's reason for
// failing campaigns is the answer's error; a standby that only found a
// holder has none.
func TestStatusCarriesTheCampaignError(t *testing.T) {
	down := fmt.Errorf("renew: %w: node 0: connection refused", redislock.ErrNoQuorum)
	st := statusOf("a", "shop/worker", redislock.State{Leader: "b", Err: down})
	if st.Leading || st.Error != down.Error() || st.Holder != "b" {
		t.Errorf("standby with Redis down: %+v; want not leading, the error, the last holder", st)
	}
	if st := statusOf("a", "shop/worker", redislock.State{Leader: "b"}); st.Error != "" {
		t.Errorf("healthy standby: error %q, want none", st.Error)
	}
}
