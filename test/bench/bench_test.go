package bench

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
)

// impl names a locker for the sub-benchmark names.
type impl struct {
	name string
	new  newLocker
}

// keySeq makes every lock name in the run fresh, across implementations,
// sub-benchmarks and b.N rounds.
var keySeq atomic.Uint64

func nextKey() string { return "bench-" + strconv.FormatUint(keySeq.Add(1), 10) }

// BenchmarkAcquireRelease measures one acquire plus one release of a fresh
// lock on a single redis-server, serially and from 8×GOMAXPROCS goroutines.
func BenchmarkAcquireRelease(b *testing.B) {
	addrs := startRedis(b, 1)
	run(b, addrs, []impl{
		{"redislock", newOurs},
		{"redislock-durable", newOursDurable},
		{"bsm", newBSM},
		{"redsync", newRedsync},
		{"rueidis", newRueidis},
		{"raw", newRaw},
	})
}

// redlockNodes are the node counts BenchmarkRedlock runs with.
var redlockNodes = []int{1, 3, 5, 7}

// BenchmarkRedlock measures one acquire plus one release of a fresh lock
// with Redlock over N independent redis-servers, N in redlockNodes, for the
// libraries that implement it: how the latency grows with N.
func BenchmarkRedlock(b *testing.B) {
	addrs := startRedis(b, slices.Max(redlockNodes))
	for _, n := range redlockNodes {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			run(b, addrs[:n], []impl{
				{"redislock", newOurs},
				{"redsync", newRedsync},
			})
		})
	}
}

// run adds <impl>/serial and <impl>/parallel sub-benchmarks for each impl,
// all over the same servers.
func run(b *testing.B, addrs []string, impls []impl) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.Run("serial", func(b *testing.B) { serial(b, open(b, im.new, addrs)) })
			b.Run("parallel", func(b *testing.B) { parallel(b, open(b, im.new, addrs)) })
		})
	}
}

// open builds a locker, closed when b's round ends, and warms it up with
// one lock so connection setup and script loading fall outside the timer.
func open(b testing.TB, newL newLocker, addrs []string) locker {
	b.Helper()
	l, err := newL(addrs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.close(); err != nil {
			b.Error(err)
		}
	})
	if err := l.acquireRelease(context.Background(), nextKey()); err != nil {
		b.Fatal(err)
	}
	return l
}

func serial(b *testing.B, l locker) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.acquireRelease(ctx, nextKey()); err != nil {
			b.Fatal(err)
		}
	}
}

// parallel reports b.Error rather than b.Fatal from the worker goroutines,
// where FailNow is not allowed; a failing worker stops.
func parallel(b *testing.B, l locker) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.acquireRelease(ctx, nextKey()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
