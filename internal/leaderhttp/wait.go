package leaderhttp

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// MaxWait bounds the wait parameter of a long poll.
const MaxWait = 5 * time.Minute

// Changes records when leadership or the holder last changed, and wakes
// the long polls waiting for it. The zero value is ready to use.
type Changes struct {
	mu   sync.Mutex
	at   time.Time     // the last change
	wake chan struct{} // closed at the next change
}

// Notify records a change at at (a reading of the clock the statuses'
// ObservedAt come from) and wakes every waiting long poll.
func (c *Changes) Notify(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = at
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}

// since reports whether a change came after t, and otherwise returns a
// channel closed at the next one.
func (c *Changes) since(t time.Time) (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.After(t) {
		return true, nil
	}
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	return false, c.wake
}

// Handler is the package's Handler with long polls: GET
// /leader?wait=30s&after=<observedAt> answers once leadership or the
// holder changed after the instant after (an earlier answer's
// observedAt), at once if it already has, or when wait has passed (at
// most MaxWait) with the status as it then is; either way the answer is
// the current status, so compare it rather than assume a change. after
// defaults to the request's arrival. A wait on clk costs nothing but a
// timer: no call to Redis or the API server. A bad wait or after gets 400
// with the reason.
func (c *Changes) Handler(status func() Status, clk clock.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("wait") {
			answer(w, status())
			return
		}
		wait, err := time.ParseDuration(q.Get("wait"))
		if err != nil || wait < 0 || wait > MaxWait {
			http.Error(w, fmt.Sprintf("wait=%q: want a duration from 0s to %v, as in wait=30s", q.Get("wait"), MaxWait), http.StatusBadRequest)
			return
		}
		after := clk.Now()
		if q.Has("after") {
			if after, err = time.Parse(time.RFC3339Nano, q.Get("after")); err != nil {
				http.Error(w, fmt.Sprintf("after=%q: want an instant as observedAt gives it (RFC 3339), as in after=2026-01-02T03:04:05.123456789Z", q.Get("after")), http.StatusBadRequest)
				return
			}
		}
		changed, wake := c.since(after)
		if !changed {
			t := clk.NewTimer(wait)
			defer t.Stop()
			select {
			case <-wake:
			case <-t.C():
			case <-r.Context().Done():
				// The client went, or the server is shutting down: the
				// latter still gets the current state.
			}
		}
		answer(w, status())
	})
}
