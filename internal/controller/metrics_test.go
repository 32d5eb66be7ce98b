package controller

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A lock's holder and Ready series follow its changes, one of each, and
// forgetting it drops its every series and no other lock's.
func TestLockSeriesFollowChangesAndGoWithTheLock(t *testing.T) {
	ns := "metrics-" + t.Name()
	count := func() (holders, readies, errs, transitions, evictions int) {
		return testutil.CollectAndCount(holderInfo), testutil.CollectAndCount(ready), testutil.CollectAndCount(redisErrorsTotal),
			testutil.CollectAndCount(transitionsTotal), testutil.CollectAndCount(evictionRisk)
	}
	h0, r0, e0, t0, v0 := count()
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
	transitionsTotal.WithLabelValues(ns, "lock").Inc()
	evictionRisk.WithLabelValues(ns, "lock").Set(1)
	if got := testutil.ToFloat64(holderInfo.WithLabelValues(ns, "lock", "c")); got != 1 {
		t.Fatalf("holder c's series is %v; want 1", got)
	}
	if h, r, e, tr, v := count(); h != h0+2 || r != r0+2 || e != e0+2 || tr != t0+1 || v != v0+1 {
		t.Fatalf("series after the changes: holder %d, ready %d, errors %d, transitions %d, eviction %d; want %d, %d, %d, %d, %d (one holder and one ready series per lock)",
			h, r, e, tr, v, h0+2, r0+2, e0+2, t0+1, v0+1)
	}
	forgetMetrics(ns, "lock")
	if h, r, e, tr, v := count(); h != h0+1 || r != r0+1 || e != e0 || tr != t0 || v != v0 {
		t.Fatalf("series after forgetting the lock: holder %d, ready %d, errors %d, transitions %d, eviction %d; want %d, %d, %d, %d, %d (only the other lock's)",
			h, r, e, tr, v, h0+1, r0+1, e0, t0, v0)
	}
	setReadyMetric(ns, "other", nil)
	setHolderMetric(ns, "other", "")
	if h, r, _, _, _ := count(); h != h0 || r != r0 {
		t.Fatalf("a free lock without a Ready condition keeps %d holder and %d ready series; want none", h-h0, r-r0)
	}
	forgetMetrics(ns, "other")
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
