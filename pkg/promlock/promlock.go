// Package promlock exports the measurements of a redislock.Client as
// Prometheus metrics:
//
//	redislock_acquire_duration_seconds{lock,result}   histogram
//	redislock_renew_duration_seconds{lock,result}     histogram
//	redislock_lost_total{lock}                        counter
//	redislock_leader_transitions_total{lock}          counter
//	redislock_wait_duration_seconds{lock,result}      histogram
//
// result is one of ok, not_obtained, guarded, no_quorum, lost, invalid or
// error. The wait histogram covers ObtainWait calls and Elector campaigns,
// from the first attempt to the grant (or, for ObtainWait, to the error it
// returned); contention, the attempts refused because another process held
// the lock, is redislock_acquire_duration_seconds_count{result="not_obtained"}.
package promlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redislock/redislock/pkg/redislock"
)

// Metrics implements redislock.Metrics on Prometheus collectors.
type Metrics struct {
	acquire     *prometheus.HistogramVec
	renew       *prometheus.HistogramVec
	lost        *prometheus.CounterVec
	transitions *prometheus.CounterVec
	wait        *prometheus.HistogramVec
}

var _ redislock.Metrics = (*Metrics)(nil)

// New creates the collectors and registers them with reg. It fails if any
// of them is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	// Lock calls take well under a millisecond on a healthy network and
	// are cut off at the node timeout (200ms by default).
	buckets := prometheus.ExponentialBuckets(0.0001, 2.5, 10)
	m := &Metrics{
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "redislock_acquire_duration_seconds", Help: "Time taken by lock acquisition attempts, by outcome.", Buckets: buckets,
		}, []string{"lock", "result"}),
		renew: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "redislock_renew_duration_seconds", Help: "Time taken by lock renewals, by outcome.", Buckets: buckets,
		}, []string{"lock", "result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redislock_lost_total", Help: "Locks lost by their holder before release.",
		}, []string{"lock"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redislock_leader_transitions_total", Help: "Leader changes seen by this process's electors.",
		}, []string{"lock"}),
		// A wait lasts from a millisecond (a free lock) to a holder's
		// whole term: 1ms to 70min.
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "redislock_wait_duration_seconds", Help: "Time from the first attempt of an ObtainWait or an elector's campaign to the grant (or the error), by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"lock", "result"}),
	}
	for _, c := range []prometheus.Collector{m.acquire, m.renew, m.lost, m.transitions, m.wait} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("promlock: register: %w", err)
		}
	}
	return m, nil
}

// Acquire observes one acquisition attempt.
func (m *Metrics) Acquire(lock string, took time.Duration, err error) {
	m.acquire.WithLabelValues(lock, Result(err)).Observe(took.Seconds())
}

// Renew observes one renewal attempt.
func (m *Metrics) Renew(lock string, took time.Duration, err error) {
	m.renew.WithLabelValues(lock, Result(err)).Observe(took.Seconds())
}

// Lost counts a lost lock.
func (m *Metrics) Lost(lock string) { m.lost.WithLabelValues(lock).Inc() }

// Transition counts a leader change.
func (m *Metrics) Transition(lock string) { m.transitions.WithLabelValues(lock).Inc() }

// Wait observes one wait for a lock.
func (m *Metrics) Wait(lock string, took time.Duration, err error) {
	m.wait.WithLabelValues(lock, Result(err)).Observe(took.Seconds())
}

// Result names the outcome of a lock call for the result label.
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redislock.ErrNotObtained):
		return "not_obtained"
	case errors.Is(err, redislock.ErrGuarded):
		return "guarded"
	case errors.Is(err, redislock.ErrLockLost):
		return "lost"
	case errors.Is(err, redislock.ErrNoQuorum):
		return "no_quorum"
	case errors.Is(err, redislock.ErrInvalidOptions):
		return "invalid"
	}
	return "error"
}
