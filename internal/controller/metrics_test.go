package controller

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/pkg/redislock"
)

// lockSeries returns the series of metric name of the locks in namespace
// ns, as a pedantic registry gathers them (which checks each against its
// description, and that no two are the same).
func lockSeries(t *testing.T, name, ns string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(lockMetrics)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if !slices.Contains(labels, "namespace="+ns) {
				continue
			}
			out[strings.Join(labels, ",")] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// A lock's holder and Ready series follow its changes, one of each, and
// forgetting it drops its every series and no other lock's.
func TestLockSeriesFollowChangesAndGoWithTheLock(t *testing.T) {
	ns := "metrics-" + t.Name()
	count := func() (holders, readies, errs, transitions, evictions int) {
		return len(lockSeries(t, "redislock_holder_info", ns)), len(lockSeries(t, "redislock_ready", ns)), len(lockSeries(t, "redislock_redis_errors_total", ns)),
			len(lockSeries(t, "redislock_observed_transitions_total", ns)), len(lockSeries(t, "redislock_eviction_risk", ns))
	}
	setHolderMetric(ns, "other", "x")
	setReadyMetric(ns, "other", &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Observed"})
	for _, holder := range []string{"a", "b", "", "c"} {
		setHolderMetric(ns, "lock", holder)
	}
	for _, reason := range []string{"Observed", "RedisUnreachable", "Observed"} {
		setReadyMetric(ns, "lock", &metav1.Condition{Status: metav1.ConditionFalse, Reason: reason})
	}
	countRedisError(ns, "lock", "Timeout")
	countRedisError(ns, "lock", "NoQuorum")
	countRedisError(ns, "lock", "Timeout")
	countTransitions(ns, "lock", 2)
	countTransitions(ns, "lock", 0)
	setEvictionMetric(ns, "lock", true)
	want := map[string]map[string]float64{
		"redislock_holder_info":                {"holder=c,name=lock,namespace=" + ns: 1, "holder=x,name=other,namespace=" + ns: 1},
		"redislock_ready":                      {"name=lock,namespace=" + ns + ",reason=Observed": 0, "name=other,namespace=" + ns + ",reason=Observed": 1},
		"redislock_redis_errors_total":         {"name=lock,namespace=" + ns + ",reason=Timeout": 2, "name=lock,namespace=" + ns + ",reason=NoQuorum": 1},
		"redislock_observed_transitions_total": {"name=lock,namespace=" + ns: 2},
		"redislock_eviction_risk":              {"name=lock,namespace=" + ns: 1},
	}
	for name, series := range want {
		if got := lockSeries(t, name, ns); !maps.Equal(got, series) {
			t.Errorf("%s after the changes: %v; want %v (one holder and one ready series per lock)", name, got, series)
		}
	}
	forgetMetrics(ns, "lock")
	if h, r, e, tr, v := count(); h != 1 || r != 1 || e != 0 || tr != 0 || v != 0 {
		t.Fatalf("series after forgetting the lock: holder %d, ready %d, errors %d, transitions %d, eviction %d; want 1, 1, 0, 0, 0 (only the other lock's)", h, r, e, tr, v)
	}
	setReadyMetric(ns, "other", nil)
	setHolderMetric(ns, "other", "")
	if h, r, _, _, _ := count(); h != 0 || r != 0 {
		t.Fatalf("a free lock without a Ready condition keeps %d holder and %d ready series; want none", h, r)
	}
	forgetMetrics(ns, "other")
}

// The series of 10,000 locks (a holder, Ready, eviction risk and
// transitions each) keep little memory between scrapes: values, not
// series objects (client_golang's vectors kept 2,165 bytes per lock).
func TestLockMetricsKeepLittleMemoryPerLock(t *testing.T) {
	const locks = 10000
	ns := "metrics-" + t.Name()
	ok := &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Observed"}
	names := make([]string, locks)
	for i := range names {
		names[i] = fmt.Sprint("lock-", i)
	}
	holder := strings.Repeat("h", 30)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for _, name := range names {
		setHolderMetric(ns, name, holder)
		setReadyMetric(ns, name, ok)
		setEvictionMetric(ns, name, false)
		countTransitions(ns, name, 1)
	}
	perLock := (int64(heap()) - int64(before)) / locks
	for _, name := range names {
		forgetMetrics(ns, name)
	}
	t.Logf("the metrics of %d locks keep %d bytes per lock", locks, perLock)
	if perLock > 400 {
		t.Errorf("the metrics of %d locks keep %d bytes per lock; want at most 400", locks, perLock)
	}
}

// What a look's metric updates cost among 100 and 10,000 other locks'
// series: the same, as each deletes only its own series (with
// DeletePartialMatch it grew with the series).
func BenchmarkLookMetrics(b *testing.B) {
	for _, others := range []int{100, 10000} {
		b.Run(fmt.Sprintf("locks=%d", others), func(b *testing.B) {
			ns := fmt.Sprintf("bench-%d", others)
			ok := &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Observed"}
			for i := range others {
				setHolderMetric(ns, fmt.Sprint(i), "h")
				setReadyMetric(ns, fmt.Sprint(i), ok)
			}
			b.ResetTimer()
			for i := range b.N {
				setHolderMetric(ns, fmt.Sprint(i%others), "h")
				setReadyMetric(ns, fmt.Sprint(i%others), ok)
			}
			b.StopTimer()
			for i := range others {
				forgetMetrics(ns, fmt.Sprint(i))
			}
		})
	}
}

// What a scrape of 10,000 locks' series costs (the registry's Gather, as
// the metrics endpoint runs it). Made at each scrape, the series take
// 25.7 MB and 160,000 allocations, freed after it; kept between scrapes
// in client_golang's vectors, 11.5 MB and as many allocations, and 21 MB
// kept all the time.
func BenchmarkGatherLockMetrics(b *testing.B) {
	const locks = 10000
	ns := "bench-gather"
	ok := &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Observed"}
	for i := range locks {
		setHolderMetric(ns, fmt.Sprint(i), "h")
		setReadyMetric(ns, fmt.Sprint(i), ok)
		setEvictionMetric(ns, fmt.Sprint(i), false)
		countTransitions(ns, fmt.Sprint(i), 1)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(lockMetrics)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i := range locks {
		forgetMetrics(ns, fmt.Sprint(i))
	}
}

// A sharded lock's unowned gauge follows each look, and goes while Redis
// does not answer; its grants counter counts each shard whose token
// changed between two looks that saw the shards, once per look.
func TestShardSeriesFollowLooks(t *testing.T) {
	ns := "metrics-" + t.Name()
	defer forgetMetrics(ns, "fleet")
	view := func(holders string, fences ...int64) redislock.ShardsView {
		var v redislock.ShardsView
		for i, f := range fences {
			v.Shards = append(v.Shards, redislock.ShardHolder{Identity: strings.TrimSpace(holders[i : i+1]), Fence: f})
		}
		return v
	}
	series := func() (unowned, grants []float64) {
		return slices.Collect(maps.Values(lockSeries(t, "redislock_shards_unowned", ns))), slices.Collect(maps.Values(lockSeries(t, "redislock_observed_shard_grants_total", ns)))
	}
	for i, step := range []struct {
		v               redislock.ShardsView
		err             error
		unowned, grants []float64
	}{
		{view("   ", 0, 0, 0), nil, []float64{3}, nil},
		{view("aa ", 1, 1, 0), nil, []float64{1}, []float64{2}},
		{view("aa ", 1, 1, 0), nil, []float64{1}, []float64{2}},
		{redislock.ShardsView{}, fmt.Errorf("no answer"), nil, []float64{2}},
		// Shard 0 moved to b, shard 2 was granted to a: two grants.
		{view("baa", 2, 1, 1), nil, []float64{0}, []float64{4}},
		// Shard 1 was granted to b and given back between two looks.
		{view("b a", 2, 2, 1), nil, []float64{1}, []float64{5}},
	} {
		setShardsMetrics(ns, "fleet", step.v, step.err)
		if u, g := series(); !slices.Equal(u, step.unowned) || !slices.Equal(g, step.grants) {
			t.Fatalf("look %d: unowned %v, grants %v; want %v, %v", i, u, g, step.unowned, step.grants)
		}
	}
	forgetMetrics(ns, "fleet")
	if u, g := series(); len(u)+len(g) != 0 {
		t.Fatalf("after the lock went: unowned %v, grants %v; want no series", u, g)
	}
}
