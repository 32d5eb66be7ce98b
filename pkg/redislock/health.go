package redislock

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Health holds whether the app can do a leader's work, for the Electors
// that gate leadership on it (ElectorOptions.Health). A probe sets it;
// whoever waits on it is woken when the app turns healthy or unhealthy, so
// a steady health costs nothing. It is safe for concurrent use, and one
// Health may gate several Electors.
type Health struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	err     error         // nil while healthy
	since   time.Time     // when it last turned healthy or unhealthy
	changed chan struct{} // closed when it next does
}

// HealthState is a Health at one instant.
type HealthState struct {
	// Err is nil while the app is healthy, else why it is not.
	Err error
	// Since is when the app last turned healthy or unhealthy (or the
	// Health was made).
	Since time.Time
	// Changed is closed when the app next turns healthy or unhealthy.
	Changed <-chan struct{}
}

// NewHealth returns a Health that starts healthy (err nil) or unhealthy
// for err, at clk's now: clk must be the clock of the Clients it gates
// (their Options.Clock); nil means the real clock.
func NewHealth(err error, clk clock.PassiveClock) *Health {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Health{clock: clk, err: err, since: clk.Now(), changed: make(chan struct{})}
}

// Set records the app's health: nil when healthy, else why not. A new
// reason for an app that stays unhealthy only replaces the reason: it
// neither restarts Since nor wakes anyone.
func (h *Health) Set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	turned := (err == nil) != (h.err == nil)
	h.err = err
	if !turned {
		return
	}
	h.since = h.clock.Now()
	close(h.changed)
	h.changed = make(chan struct{})
}

// State returns the health now.
func (h *Health) State() HealthState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HealthState{Err: h.err, Since: h.since, Changed: h.changed}
}
