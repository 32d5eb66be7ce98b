package redisstats_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
)

func TestParseReadsCallsPerCommand(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_publish:calls=3,usec=1,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n"
	c, err := redisstats.Parse(info)
	if err != nil {
		t.Fatal(err)
	}
	if c["evalsha"] != 12 || c["publish"] != 3 || c["client setinfo"] != 2 || c.Scripts() != 12 || c.Total() != 17 {
		t.Fatalf("parsed %v (scripts %d, total %d)", c, c.Scripts(), c.Total())
	}
	if d := c.Sub(redisstats.Counts{"evalsha": 10, "publish": 3}); d["evalsha"] != 2 || len(d) != 2 {
		t.Fatalf("Sub: %v; want evalsha 2 and client setinfo 2 only", d)
	}
	if _, err := redisstats.Parse("cmdstat_get:calls=x,usec=1\r\n"); err == nil || !strings.Contains(err.Error(), "cmdstat_get") {
		t.Fatalf("a malformed line: %v; want an error naming it", err)
	}
}

// The budget is three times E1's natural rate plus a few calls per
// leadership change: 30 s at renewInterval 500ms and ttl 3s with 4
// standbys is 60 renewals + 40 attempts = 100 natural.
func TestBudgetFromNaturalRate(t *testing.T) {
	if n := redisstats.Natural(30*time.Second, 3*time.Second, 500*time.Millisecond, 4); n != 100 {
		t.Fatalf("Natural %v, want 100", n)
	}
	if b := redisstats.Budget(30*time.Second, 3*time.Second, 500*time.Millisecond, 4, 2); b != 300+40 {
		t.Fatalf("Budget %d, want 340", b)
	}
}

// A window counts, per server and in order, what each executed between
// Begin and End: the commands sent to it and Begin's own INFO, nothing of
// another server's.
func TestWindowCountsEachServerBetweenBeginAndEnd(t *testing.T) {
	clients := redistest.Clients(t, redistest.StartN(t, 2)...)
	ctx := context.Background()
	w, err := redisstats.Begin(ctx, clients...)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := clients[1].Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	counts, took, err := w.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []redisstats.Counts{{"info": 1}, {"info": 1, "set": 3}}
	if !reflect.DeepEqual(counts, want) || took <= 0 {
		t.Fatalf("End: %v over %v; want %v over a positive time", counts, took, want)
	}
}

// A server that cannot be read fails the reading, naming which it was.
func TestReadAllNamesTheServerItCannotRead(t *testing.T) {
	servers := redistest.StartN(t, 2)
	clients := redistest.Clients(t, servers...)
	servers[1].Stop()
	if _, err := redisstats.ReadAll(context.Background(), clients...); err == nil || !strings.Contains(err.Error(), "server 1") {
		t.Fatalf("ReadAll with server 1 stopped: %v; want an error naming server 1", err)
	}
}
