package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics on controller-runtime's registry.
var (
	holderInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redislock_holder_info",
		Help: "1 for the current holder of each RedisLock; no series while the lock is free.",
	}, []string{"namespace", "name", "holder"})
	transitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redislock_observed_transitions_total",
		Help: "Holder changes the controller saw, per RedisLock.",
	}, []string{"namespace", "name"})
	ready = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redislock_ready",
		Help: "1 while the RedisLock's Ready condition is True, 0 while it is not (an invalid spec, a missing Secret, Redis unreachable, ...: the condition's reason says which).",
	}, []string{"namespace", "name", "reason"})
	evictionRisk = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redislock_eviction_risk",
		Help: "1 when a node of the RedisLock has a memory limit and a policy that can evict lock keys, else 0.",
	}, []string{"namespace", "name"})
	redisErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redislock_redis_errors_total",
		Help: "Failed inspections of a RedisLock's Redis, by reason.",
	}, []string{"namespace", "name", "reason"})
)

func init() {
	metrics.Registry.MustRegister(holderInfo, transitionsTotal, redisErrorsTotal, evictionRisk, ready)
}

// setHolderMetric makes holder the one holder series of the lock.
func setHolderMetric(namespace, name, holder string) {
	holderInfo.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	if holder != "" {
		holderInfo.WithLabelValues(namespace, name, holder).Set(1)
	}
}

// forgetMetrics drops every series of a deleted RedisLock.
func forgetMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	holderInfo.DeletePartialMatch(l)
	transitionsTotal.DeletePartialMatch(l)
	redisErrorsTotal.DeletePartialMatch(l)
	evictionRisk.DeletePartialMatch(l)
	ready.DeletePartialMatch(l)
}

// setReadyMetric makes the Ready condition c the one ready series of the
// lock.
func setReadyMetric(namespace, name string, c *metav1.Condition) {
	ready.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	if c == nil {
		return
	}
	v := 0.0
	if c.Status == metav1.ConditionTrue {
		v = 1
	}
	ready.WithLabelValues(namespace, name, c.Reason).Set(v)
}
