package leaderhttp

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// MaxWait bounds the wait parameter of a long poll.
const MaxWait = 5 * time.Minute

// answerGrace is how long past its wait a held long poll's connection has
// to carry the answer: the write deadline a long poll sets is the end of
// its wait plus answerGrace.
const answerGrace = 10 * time.Second

// RetryAfter is the Retry-After (in seconds) of a long poll answered at
// once because as many as a handler holds were held.
const RetryAfter = 1 * time.Second

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

// LongPolls is the /leader handler with long polls (see Changes.Handler),
// which counts the long polls it holds.
type LongPolls struct {
	changes *Changes
	status  func() Status
	clk     clock.Clock
	held    chan struct{} // one token per held long poll, up to its capacity
	overCap atomic.Uint64
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
//
// At most maxHeld long polls (1 if maxHeld is less) are held at once. One more is
// answered at once, as if its wait had passed, with the header
// Retry-After: 1 asking its client to wait a second before the next: the
// answer is the current status, with the code and body of any other, so a
// client that compares loses only latency. (A 503 would not do: on /leader
// it means "not leading", and a probe or script would read overload as a
// standby.) A held long poll moves its connection's write deadline to the
// end of its wait plus a grace of 10s, so a server's WriteTimeout shorter
// than MaxWait bounds the other requests alone. (Its ReadTimeout does not
// reach a handler: net/http lifts the read deadline while it runs.)
func (c *Changes) Handler(status func() Status, clk clock.Clock, maxHeld int) *LongPolls {
	return &LongPolls{changes: c, status: status, clk: clk, held: make(chan struct{}, max(maxHeld, 1))}
}

// Held returns the number of long polls held now.
func (l *LongPolls) Held() int { return len(l.held) }

// OverCap returns the number of long polls answered at once so far
// because as many as the handler holds were held.
func (l *LongPolls) OverCap() uint64 { return l.overCap.Load() }

func (l *LongPolls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("wait") {
		answer(w, l.status())
		return
	}
	wait, err := time.ParseDuration(q.Get("wait"))
	if err != nil || wait < 0 || wait > MaxWait {
		http.Error(w, fmt.Sprintf("wait=%q: want a duration from 0s to %v, as in wait=30s", q.Get("wait"), MaxWait), http.StatusBadRequest)
		return
	}
	after := l.clk.Now()
	if q.Has("after") {
		if after, err = time.Parse(time.RFC3339Nano, q.Get("after")); err != nil {
			http.Error(w, fmt.Sprintf("after=%q: want an instant as observedAt gives it (RFC 3339), as in after=2026-01-02T03:04:05.123456789Z", q.Get("after")), http.StatusBadRequest)
			return
		}
	}
	if changed, wake := l.changes.since(after); !changed && wait > 0 {
		l.hold(w, r, wait, wake)
	}
	answer(w, l.status())
}

// hold waits, if a long poll may be held, until wake is closed, wait has
// passed on the handler's clock, or the request ends (the client went, or
// the server is shutting down: the latter still gets the current state).
func (l *LongPolls) hold(w http.ResponseWriter, r *http.Request, wait time.Duration, wake <-chan struct{}) {
	select {
	case l.held <- struct{}{}:
		defer func() { <-l.held }()
	default:
		l.overCap.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
		return
	}
	// The deadline is on the wall clock, whatever clock the wait is on. A
	// ResponseWriter without deadlines (a test's recorder) has no server
	// timeout to outlast either.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + answerGrace))
	t := l.clk.NewTimer(wait)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C():
	case <-r.Context().Done():
	}
}
