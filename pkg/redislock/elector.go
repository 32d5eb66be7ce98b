package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// ElectorOptions configures an Elector.
type ElectorOptions struct {
	// Name is the lock to campaign for. Required.
	Name string
	// Timing sets the lock's ttl and how it is renewed; zero fields take
	// Timing's defaults.
	Timing
	// OnStartedLeading runs in its own goroutine each time this candidate
	// becomes leader. Its context is cancelled when leadership ends, no
	// later than RenewDeadline after the last successful renewal. It may
	// do the leader's work itself, until its context ends: the lock is
	// released only once it has returned. Required.
	OnStartedLeading func(ctx context.Context, l *Lock)
	// OnStoppedLeading runs each time leadership ends: after the
	// leadership context is cancelled and that term's OnStartedLeading has
	// returned, and before the lock is released, so the work it stops has
	// stopped before another candidate can lead. The release, and so the
	// handover, waits for it to return. Optional.
	OnStoppedLeading func()
	// OnNewLeader runs when the observed leader changes, with its
	// identity, this candidate's included. Optional.
	OnNewLeader func(identity string)
	// Metadata is published beside this candidate's lock while it leads
	// (see ObtainOptions.Metadata). Optional; at most MaxMetadataLen bytes.
	Metadata string
	// Health gates leadership on the app's health. The Elector campaigns
	// only while it is healthy (meanwhile State's Err wraps ErrUnhealthy
	// and the reason), and a leader that stays unhealthy for StepDownAfter
	// steps down: its leadership context ends with cause ErrUnhealthy,
	// OnStoppedLeading runs and the lock is released, so that a healthy
	// candidate takes over at once. Health thus moves leadership at most
	// once per StepDownAfter. Optional.
	Health *Health
	// StepDownAfter is how long a leader may stay unhealthy before it
	// steps down; default TTL. Only with Health.
	StepDownAfter time.Duration
	// Admitted, when set, is called after each acquisition, with the
	// lock held and renewed, and the candidate leads only once it returns
	// nil: say, once another system (the API server's view of the lock,
	// which an admission policy compares writers against) shows this
	// candidate as the holder. Meanwhile State reports Leading false and
	// an Err wrapping ErrNotAdmitted, and OnStartedLeading has not run.
	// Its context ends when the lock is lost or the campaign ends. An
	// error releases the lock, and the candidate tries again after
	// RenewInterval (jittered), State's Err wrapping ErrNotAdmitted and
	// the error. Optional.
	Admitted func(ctx context.Context) error
}

// Elector campaigns for one lock and leads while it holds it, over and
// over until its context ends. Waiting candidates do not poll: they sleep
// until the holder's key would expire (plus a little jitter), and wake at
// once when the holder releases (pub/sub), so a graceful handover takes
// about one round trip and a crashed leader is replaced within its TTL.
type Elector struct {
	c *Client
	o ElectorOptions

	mu     sync.Mutex
	lock   *Lock
	held   context.Context
	leader string
	err    error // why the last attempt failed, unless another holds the lock
}

// NewElector checks o and returns an Elector; it does no I/O. Invalid
// options give an error wrapping ErrInvalidOptions that names the rule.
func (c *Client) NewElector(o ElectorOptions) (*Elector, error) {
	if err := checkName(o.Name); err != nil {
		return nil, err
	}
	o.Timing = o.Timing.WithDefaults()
	if err := c.CheckTiming(o.Timing); err != nil {
		return nil, err
	}
	if o.OnStartedLeading == nil {
		return nil, fmt.Errorf("%w: OnStartedLeading is nil", ErrInvalidOptions)
	}
	if err := checkMetadata(o.Metadata); err != nil {
		return nil, err
	}
	switch {
	case o.StepDownAfter < 0:
		return nil, fmt.Errorf("%w: StepDownAfter %v is negative", ErrInvalidOptions, o.StepDownAfter)
	case o.StepDownAfter > 0 && o.Health == nil:
		return nil, fmt.Errorf("%w: StepDownAfter is set without Health", ErrInvalidOptions)
	case o.StepDownAfter == 0:
		o.StepDownAfter = o.TTL
	}
	return &Elector{c: c, o: o}, nil
}

// State is what an Elector knows at one instant.
type State struct {
	// At is the instant the rest is true of: one reading of the Client's
	// clock, taken before the other fields were decided.
	At time.Time
	// Leading reports whether this candidate leads at At: it holds the
	// lock, and At is before ValidUntil.
	Leading bool
	// Leader is the identity of the leader last observed, this
	// candidate's while Leading; "" when unknown.
	Leader string
	// Fence is the fencing token of the held lock while Leading, else 0.
	Fence int64
	// ValidUntil is the step-down deadline while Leading (the start of
	// the last successful renewal plus RenewDeadline), else the zero time.
	// Leading turns false at this instant whether or not Redis answers.
	ValidUntil time.Time
	// Err is why the last campaign attempt failed, when it was not because
	// another candidate holds the lock: Redis unreachable (ErrNoQuorum),
	// the restart guard (ErrGuarded), a key this package did not write
	// (ErrMalformedValue). Nil while leading, and after an attempt that
	// found a holder.
	Err error
}

// State returns what the elector knows now. It reads the clock, so Leading
// turns false the instant the step-down deadline passes, even before the
// leadership context is cancelled. It is the Elector's one accessor: the
// held lock and its context are OnStartedLeading's arguments. A caller that reports it (say,
// over HTTP) should report At with it: if the process is paused after the
// clock was read, the answer is still true of At.
func (e *Elector) State() State {
	// The clock first, as At's doc says: a change made after this reading
	// and before the copy below is then reported with an At before its
	// notification, so a caller that waits for news after At (the agent's
	// long poll) cannot miss it.
	at := e.c.opts.Clock.Now()
	e.mu.Lock()
	l, held, leader, err := e.lock, e.held, e.leader, e.err
	e.mu.Unlock()
	s := State{At: at, Leader: leader, Err: err}
	if l == nil || held.Err() != nil {
		return s
	}
	if until := l.stepDown(e.o.RenewDeadline); s.At.Before(until) {
		s.Leading, s.Leader, s.Fence, s.ValidUntil, s.Err = true, e.c.opts.Identity, l.Fence(), until, nil
	}
	return s
}

// Run campaigns until ctx ends, then releases the lock if it holds it
// (once OnStartedLeading and OnStoppedLeading have returned) and returns
// nil. Redis faults do not end it: it logs them and retries after
// a RenewInterval, jittered by half of it either way. A standby costs about
// one attempt per TTL while a holder renews, and wakes early only for a
// holder's release, never for a rival's give-back (E1).
func (e *Elector) Run(ctx context.Context) error {
	log := e.c.opts.Logger.WithValues("lock", e.o.Name, "identity", e.c.opts.Identity)
	wake, unsubscribe := e.c.WatchReleases(ctx, e.o.Name)
	defer unsubscribe()
	clk := e.c.opts.Clock
	timer := clk.NewTimer(0)
	defer timer.Stop()
	// campaign is when the first attempt of this campaign was made: zero
	// until then, and again after each term.
	var campaign time.Time
	// recovered is closed when the unhealthy app turns healthy.
	var recovered <-chan struct{}
	// woken is wake, or nil while the elector backs off after Admitted
	// refused it: its own release would wake it at once.
	woken := wake
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		case <-woken:
		case <-recovered:
		}
		if ctx.Err() != nil {
			return nil
		}
		// The attempt below sees every release so far.
		select {
		case <-wake:
		default:
		}
		recovered, woken = nil, wake
		if healed, why := e.unhealthy(); healed != nil {
			// No attempt until the app is healthy: a release that
			// wakes this candidate meanwhile finds it unhealthy still.
			recovered = healed
			e.setErr(log, why)
			campaign = time.Time{}
			timer.Stop()
			continue
		}
		if campaign.IsZero() {
			campaign = clk.Now()
		}
		l, h, err := e.c.obtain(ctx, e.o.Name, e.o.TTL, e.o.Metadata)
		var wait time.Duration
		switch {
		case err == nil:
			e.c.opts.Metrics.Wait(e.o.Name, clk.Since(campaign), nil)
			campaign = time.Time{}
			e.setErr(log, nil)
			if !e.lead(ctx, l, log) && ctx.Err() == nil {
				wait, woken = jitter(e.o.RenewInterval), nil
			}
		case errors.Is(err, ErrNotObtained), errors.Is(err, ErrGuarded):
			e.observe(h.identity)
			// A holder is no fault; a foreign value or the guard are
			// worth telling (once), though waiting is all there is to do.
			if errors.Is(err, ErrMalformedValue) || errors.Is(err, ErrGuarded) {
				e.setErr(log, err)
			} else {
				e.setErr(log, nil)
			}
			wait = e.afterRefusal(h)
		case ctx.Err() == nil:
			wait = jitter(e.o.RenewInterval)
			e.setErr(log, err)
			log.V(1).Info("campaign attempt failed", "error", err.Error(), "retryIn", wait.String())
		}
		timer.Stop()
		timer.Reset(wait)
	}
}

// setErr records why the last attempt failed (nil: it did not fail, or
// found a holder), and logs a new reason once rather than at every attempt.
func (e *Elector) setErr(log logr.Logger, err error) {
	e.mu.Lock()
	prev := e.err
	e.err = err
	e.mu.Unlock()
	logChange(log, prev, err, "cannot campaign", "campaigning again")
}

// logChange logs err, the reason a loop cannot do its work, when it is new
// (its sentinel differs from prev's), and the loop's recovery when err is
// nil and prev was not.
func logChange(log logr.Logger, prev, err error, cannot, again string) {
	switch {
	case err != nil && (prev == nil || !errors.Is(err, sentinelOf(prev))):
		log.Info(cannot, "error", err.Error())
	case err == nil && prev != nil:
		log.Info(again, "after", prev.Error())
	}
}

// sentinelOf returns the sentinel of this package that err wraps, or err.
func sentinelOf(err error) error {
	for _, s := range []error{ErrGuarded, ErrMalformedValue, ErrNoQuorum, ErrInvalidOptions, ErrUnhealthy, ErrNotAdmitted} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// afterRefusal is how long to wait after an attempt that found h. A holder
// with a majority is waited for until its keys would expire (it wakes us
// sooner if it releases). A split, where no one holds a majority, is waited
// out at random within a RenewInterval, bounded by when the keys expire:
// the candidates that split the nodes give them back, or their keys expire,
// and an immediate retry would meet the same rivals again.
func (e *Elector) afterRefusal(h held) time.Duration {
	return afterRefusal(h, e.o.TTL, e.o.RenewInterval)
}

// afterRefusal is how long a candidate for a lock of ttl, which backs off
// within renewInterval after a split, waits after an attempt that found h.
func afterRefusal(h held, ttl, renewInterval time.Duration) time.Duration {
	wait := min(h.free, ttl)
	if h.split {
		wait = min(wait, renewInterval/8+rand.N(renewInterval*7/8))
	}
	return wait + rand.N(ttl/200+2*time.Millisecond)
}

// jitter returns d scaled by a random factor in [0.5, 1.5), so that
// candidates that failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}

// unhealthy returns, while Health says the app is unhealthy, a channel
// closed when that changes and why (an error wrapping ErrUnhealthy); nil
// and nil otherwise.
func (e *Elector) unhealthy() (healed <-chan struct{}, why error) {
	if e.o.Health == nil {
		return nil, nil
	}
	if st := e.o.Health.State(); st.Err != nil {
		return st.Changed, fmt.Errorf("%w: %w", ErrUnhealthy, st.Err)
	}
	return nil, nil
}

// lead holds l until leadership ends, then releases it. It reports
// whether it led: false when Admitted refused (or the lock was lost
// first).
func (e *Elector) lead(ctx context.Context, l *Lock, campaignLog logr.Logger) bool {
	log := e.c.opts.Logger.WithValues("lock", e.o.Name, "identity", e.c.opts.Identity, "fence", l.Fence())
	term, end := context.WithCancelCause(ctx)
	defer end(nil)
	held, stop := l.watch(term, e.o.Timing)
	if err := e.admitted(held, campaignLog); err != nil {
		end(err)
		if lost := stop(); lost != nil {
			err = fmt.Errorf("%w: %w", ErrNotAdmitted, lost)
		}
		e.setErr(campaignLog, err)
		release(ctx, l, log)
		return false
	}
	e.mu.Lock()
	e.lock, e.held = l, held
	e.mu.Unlock()
	log.Info("started leading")
	e.observe(e.c.opts.Identity)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		e.o.OnStartedLeading(held, l)
	}()
	e.awaitEnd(held, end)
	err := stop()
	if err == nil {
		err = context.Cause(term) // ErrUnhealthy, or why ctx ended
	}
	e.mu.Lock()
	// Who leads next is unknown until the next attempt observes it.
	e.lock, e.held, e.leader = nil, nil, ""
	e.mu.Unlock()
	// The term's work may be OnStartedLeading itself: it stops first.
	<-ran
	log.Info("stopped leading", "reason", fmt.Sprint(err))
	if e.o.OnStoppedLeading != nil {
		e.o.OnStoppedLeading()
	}
	release(ctx, l, log)
	return true
}

// release releases l at the end of a term, even when ctx has ended.
func release(ctx context.Context, l *Lock, log logr.Logger) {
	if err := l.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, ErrNotHeld) {
		log.Info("release failed; the key expires by itself", "error", err.Error())
	}
}

// admitted waits for Admitted, if set, to admit the lock held in held:
// nil once it has while held lasts; else an error wrapping ErrNotAdmitted
// (and Admitted's error).
func (e *Elector) admitted(held context.Context, log logr.Logger) error {
	if e.o.Admitted == nil {
		return nil
	}
	e.setErr(log, fmt.Errorf("%w: waiting", ErrNotAdmitted))
	err := e.o.Admitted(held)
	if err == nil && held.Err() != nil {
		err = held.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAdmitted, err)
	}
	e.setErr(log, nil)
	return nil
}

// awaitEnd returns once held, a term's leadership context, is done. With
// Health, it ends the term itself (end) once the app has stayed unhealthy
// for StepDownAfter; it wakes only when the health changes or that time
// is up, and keeps no timer while the app is healthy.
func (e *Elector) awaitEnd(held context.Context, end context.CancelCauseFunc) {
	if e.o.Health == nil {
		<-held.Done()
		return
	}
	clk := e.c.opts.Clock
	var due clock.Timer
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	for {
		st := e.o.Health.State()
		var dueC <-chan time.Time
		if st.Err == nil && due != nil {
			due.Stop()
		}
		if st.Err != nil {
			left := e.o.StepDownAfter - clk.Since(st.Since)
			if left <= 0 {
				end(fmt.Errorf("%w for %v: %w", ErrUnhealthy, e.o.StepDownAfter, st.Err))
				<-held.Done()
				return
			}
			if due == nil {
				due = clk.NewTimer(left)
			} else {
				due.Reset(left)
			}
			dueC = due.C()
		}
		select {
		case <-held.Done():
			return
		case <-st.Changed:
		case <-dueC:
		}
	}
}

// observe records the leader seen and reports a change.
func (e *Elector) observe(identity string) {
	if identity == "" {
		return
	}
	e.mu.Lock()
	changed := identity != e.leader
	e.leader = identity
	e.mu.Unlock()
	if !changed {
		return
	}
	e.c.opts.Metrics.Transition(e.o.Name)
	if e.o.OnNewLeader != nil {
		e.o.OnNewLeader(identity)
	}
}
