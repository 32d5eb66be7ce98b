package redisconn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// CheckDestination judges every connection the clients make, the master a
// Sentinel names included, before it is made: a master the check refuses
// fails the call with the check's error, though its Sentinel answered.
func TestCheckDestinationJudgesTheMasterASentinelNames(t *testing.T) {
	g := redistest.StartSentinelGroup(t, 0, 1)
	errRefused := errors.New("refused by the test")
	var (
		mu     sync.Mutex
		judged []string
	)
	cfg := Config{Mode: v1alpha1.ModeSentinel, Addrs: []string{g.Sentinels[0].Addr}, MasterName: g.MasterName, NodeTimeout: 2 * time.Second,
		CheckDestination: func(addr, resolved string) error {
			mu.Lock()
			judged = append(judged, addr+" via "+resolved)
			mu.Unlock()
			if addr == g.Master.Addr {
				return errRefused
			}
			return nil
		}}
	c := cfg.Clients()[0]
	defer func() { _ = c.Close() }()
	if err := c.Ping(context.Background()).Err(); !errors.Is(err, errRefused) {
		t.Fatalf("PING through the Sentinel: %v; want the check's refusal of the master", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, addr := range []string{g.Sentinels[0].Addr, g.Master.Addr} {
		if !slices.Contains(judged, addr+" via "+addr) {
			t.Errorf("%s was not judged; judged: %v", addr, judged)
		}
	}
}
