package redislock

import "time"

// Metrics receives the measurements of a Client. Implementations must be
// safe for concurrent use and must not block. Package
// github.com/redislock/redislock/pkg/promlock adapts it to Prometheus.
type Metrics interface {
	// Acquire records one acquisition attempt on key: how long it took
	// and its outcome (nil, or an error wrapping a sentinel of this package).
	Acquire(key string, took time.Duration, err error)
	// Renew records one renewal attempt on key.
	Renew(key string, took time.Duration, err error)
	// Lost records that a holder of key lost the lock before releasing it.
	Lost(key string)
	// Transition records that an Elector on key saw the leader change.
	Transition(key string)
	// Wait records the time a caller waited for key: from the first
	// attempt of an ObtainWait to its return (err is what it returned),
	// or from an Elector's first attempt of a campaign to the grant (err
	// nil). Attempts refused because another held key are recorded by
	// Acquire with an error wrapping ErrNotObtained: that is contention.
	Wait(key string, took time.Duration, err error)
}

type noMetrics struct{}

func (noMetrics) Acquire(string, time.Duration, error) {}
func (noMetrics) Renew(string, time.Duration, error)   {}
func (noMetrics) Lost(string)                          {}
func (noMetrics) Transition(string)                    {}
func (noMetrics) Wait(string, time.Duration, error)    {}
