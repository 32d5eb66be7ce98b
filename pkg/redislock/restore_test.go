package redislock_test

import (
	"context"
	_ "embed"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

//go:embed restore.lua
var restoreLua string

// A holder repair that arrives late never moves a node's validity back
// (M1), so it cannot hand a rival a majority while the holder still
// believes (S1). The issue-29 sequence on three real servers, the delayed
// restore replayed by hand with the arguments the holder sent it with:
//  1. H holds x on N1-N3 with a ttl of 3s;
//  2. H's key vanishes on N3, and H's repair of it is delayed;
//  3. a later renewal repairs N3 all the same;
//  4. H's key vanishes on N1;
//  5. H renews with a ttl of 20s; N1 does not answer (paused), N2 and N3
//     confirm: H counts on 20s;
//  6. H's key vanishes on N3 again, whose validity says +20s;
//  7. the delayed repair of step 2 runs on N3 (key and validity for 3s, as
//     restore.lua wrote them before this test);
//  8. once that key has expired, a rival asks for x with a ttl of 20s.
//
// Without step 7 the rival gets N1 only; with a validity moved back, N1 and
// N3, a majority, while H believes it holds for 17 s more.
func TestLateRestoreNeverMovesTheValidityBack(t *testing.T) {
	t.Parallel()
	servers := redistest.StartN(t, 3)
	nodes := redistest.Clients(t, servers...)
	ctx := context.Background()
	h := newClient(t, "h", servers...)
	const ttl = 3 * time.Second // long enough for steps 1-5 on a loaded machine
	l, err := h.Obtain(ctx, "x", ttl)
	if err != nil {
		t.Fatal(err)
	}
	key, until := lockKey("x"), lockKey("x")+":until"
	value := get(t, servers[1], key)
	// The repair H sends N3 in step 2, held back: restore.lua's KEYS and
	// ARGV as Lock.restore gives them.
	delayed := func() error {
		return redis.NewScript(restoreLua).Run(ctx, nodes[2],
			[]string{key, key + ":fence", until, key + ":meta"},
			value, ttl.Milliseconds(), l.Fence(), redislock.FenceLifetime(ttl).Milliseconds(), "").Err()
	}
	del := func(i int) {
		t.Helper()
		if err := nodes[i].Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	del(2)
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("step 3, a renewal with N1 and N2: %v", err)
	}
	if get(t, servers[2], key) != value {
		t.Fatal("step 3: the renewal did not repair N3")
	}
	del(0)
	// N1 answers nothing for longer than the node timeout: H's renewal
	// there, and so its repair, never happen.
	if err := nodes[0].ClientPause(ctx, 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.RefreshTTL(ctx, 20*time.Second); err != nil {
		t.Fatalf("step 5, a renewal with N2 and N3: %v", err)
	}
	del(2)
	before, err := nodes[2].Get(ctx, until).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if err := delayed(); err != nil {
		t.Fatalf("step 7, the delayed repair: %v", err)
	}
	after, err := nodes[2].Get(ctx, until).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if after < before {
		t.Errorf("the late repair moved N3's validity back by %v (M1)", time.Duration(before-after)*time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the late-restored key to expire on N3", func() bool {
		return nodes[2].Exists(ctx, key).Val() == 0
	})
	if err := nodes[0].Ping(ctx).Err(); err != nil { // N1 answers again
		t.Fatal(err)
	}
	rival := newClient(t, "rival", servers...)
	if r, err := rival.Obtain(ctx, "x", 20*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		if err == nil {
			t.Fatalf("the rival holds x with fence %d while H believes until %v (valid %v): two leaders (S1)", r.Fence(), time.Until(l.Deadline()).Round(time.Second), l.Valid())
		}
		t.Fatalf("the rival's attempt: %v; want ErrNotObtained", err)
	}
	if !l.Valid() {
		t.Fatal("H no longer believes it holds x; the sequence did not run as meant")
	}
}
