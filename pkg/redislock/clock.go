package redislock

import "time"

// Clock is the time source of a Client and everything it creates. All
// deadlines are computed from Now's monotonic reading, so wall-clock jumps
// (NTP steps, a manual date change) never extend a lock's local validity.
type Clock interface {
	// Now returns the current time, with a monotonic reading.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that Clock users need.
type Timer interface {
	// C is the channel the timer fires on; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired.
	Stop() bool
	// Reset makes the timer fire after d instead.
	Reset(d time.Duration) bool
}

// RealClock is the Clock of the time package.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
