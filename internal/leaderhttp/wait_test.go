package leaderhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// longPoll serves one request to h in the background and returns the
// recorder and a channel closed once h returned.
func longPoll(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, <-chan struct{}) {
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, r)
	}()
	return rec, done
}

func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the long poll did not return", what)
	}
}

// returned reports whether h has returned yet, without waiting.
func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitTimer waits until the handler waits on the fake clock's timer.
func waitTimer(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	}); err != nil {
		t.Fatal("the long poll never waited on the clock")
	}
}

func TestLongPollAnswersAtTheNextChange(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var c Changes
	leading := false
	status := func() Status { return Status{Leading: leading, Identity: "a", ObservedAt: clk.Now()} }
	h := c.Handler(status, clk, 10)
	before := clk.Now().Format(time.RFC3339Nano)
	rec, done := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=1m&after="+before, nil))
	waitTimer(t, clk)
	if returned(done) {
		t.Fatal("answered before any change")
	}
	leading = true
	clk.Step(time.Millisecond)
	c.Notify(clk.Now())
	waitDone(t, done, "after a change")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"leading":true`) {
		t.Fatalf("answer %d %s; want the new state, leading", rec.Code, rec.Body)
	}
	// A change after the earlier answer was seen already: at once.
	rec, done = longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=1m&after="+before, nil))
	waitDone(t, done, "a change already made")
	if rec.Code != http.StatusOK {
		t.Fatalf("answer %d; want 200", rec.Code)
	}
}

func TestLongPollAnswersTheUnchangedStateWhenTheWaitEnds(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var c Changes
	h := c.Handler(func() Status { return Status{Identity: "a", ObservedAt: clk.Now()} }, clk, 10)
	rec, done := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=30s", nil))
	waitTimer(t, clk)
	clk.Step(29 * time.Second)
	if returned(done) {
		t.Fatal("answered before the wait ended")
	}
	clk.Step(time.Second)
	waitDone(t, done, "at the end of the wait")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"observedAt":"2026-01-02T03:04:35Z"`) {
		t.Fatalf("answer %d %s; want 503 observed when the wait ended", rec.Code, rec.Body)
	}
}

func TestLongPollWithoutWaitAnswersAtOnceAndBadParametersGet400(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var c Changes
	h := c.Handler(func() Status { return Status{Identity: "a"} }, clk, 10)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/leader", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("plain GET: %d, want 503 at once", rec.Code)
	}
	for query, want := range map[string]string{
		"wait=soon":                   `wait="soon": want a duration from 0s to 5m0s`,
		"wait=6m":                     `wait="6m"`,
		"wait=-1s":                    `wait="-1s"`,
		"wait=1s&after=yesterday":     `after="yesterday": want an instant as observedAt gives it`,
		"wait=1s&after=1700000000000": `after="1700000000000"`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/leader?"+query, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %q; want 400 saying %q", query, rec.Code, rec.Body, want)
		}
	}
}

func TestLongPollEndsWithTheClient(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var c Changes
	h := c.Handler(func() Status { return Status{Identity: "a"} }, clk, 10)
	ctx, cancel := context.WithCancel(context.Background())
	_, done := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=5m", nil).WithContext(ctx))
	waitTimer(t, clk)
	cancel()
	waitDone(t, done, "after the client went")
	if clk.HasWaiters() {
		t.Error("the timer of a long poll whose client went is still set")
	}
}

// Beyond the cap, a long poll is not held but answered at once, with the
// current status and Retry-After, while the held ones stay held; a slot
// that frees is taken by the next long poll.
func TestLongPollBeyondTheCapIsAnsweredAtOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var c Changes
	h := c.Handler(func() Status { return Status{Leading: true, Identity: "a", ObservedAt: clk.Now()} }, clk, 2)
	waitHeld := func(n int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return h.Held() == n, nil
		}); err != nil {
			t.Fatalf("%d long polls held, want %d", h.Held(), n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, first := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=5m", nil).WithContext(ctx))
	_, second := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=5m", nil))
	waitHeld(2)
	rec, third := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=5m", nil))
	waitDone(t, third, "beyond the cap")
	if rec.Code != http.StatusOK || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), `"leading":true`) {
		t.Errorf("answer beyond the cap: %d %v %s; want the status (200, leading) with Retry-After: 1", rec.Code, rec.Header(), rec.Body)
	}
	if returned(first) || returned(second) || h.OverCap() != 1 {
		t.Errorf("first returned %t, second %t, over the cap %d; want both held, one over", returned(first), returned(second), h.OverCap())
	}
	cancel()
	waitDone(t, first, "after its client went")
	waitHeld(1)
	_, fourth := longPoll(h, httptest.NewRequest(http.MethodGet, "/leader?wait=5m", nil))
	waitHeld(2)
	if returned(fourth) || h.OverCap() != 1 {
		t.Errorf("a long poll after a slot freed: returned %t, over the cap %d; want it held", returned(fourth), h.OverCap())
	}
	clk.Step(time.Millisecond)
	c.Notify(clk.Now())
	waitDone(t, second, "after a change")
	waitDone(t, fourth, "after a change")
	waitHeld(0)
}
