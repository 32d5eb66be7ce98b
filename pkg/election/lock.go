// Package election plugs Redis locks into client-go leader election: Lock
// is a resourcelock.Interface over any redislock.Client, so election costs
// no API-server writes. It needs client-go only; pkg/mgrelection builds a
// Lock from a RedisLock resource for controller-runtime managers.
//
// client-go's safety rules stay as they are (a leader that cannot renew
// within RenewDeadline steps down, and RenewDeadline < LeaseDuration); the
// key in Redis expires after LeaseDuration, so a crashed leader's lock frees
// itself. What changes is how fast standbys notice: Get blocks a standby
// until the holder's key is due to expire or a release message arrives, so
// a graceful handover takes milliseconds and a crash about LeaseDuration,
// instead of up to a RetryPeriod more.
package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/redislock/redislock/pkg/redislock"
)

// resource names the lock in the API errors client-go expects.
var resource = schema.GroupResource{Group: "redislock.io", Resource: "redislocks"}

// Lock is a client-go resourcelock.Interface on the Redis lock called Name,
// acquired with the identity of its redislock.Client. Use one Lock per
// LeaderElector.
type Lock struct {
	client *redislock.Client
	name   string
	ttl    time.Duration
	opts   LockOptions

	mu       sync.Mutex
	held     *redislock.Lock
	record   resourcelock.LeaderElectionRecord // as last written by us
	reported string                            // holder last returned by Get
	nonce    int64
	// unhealthy is when the current run of failed health checks began;
	// zero while they pass.
	unhealthy time.Time
}

// LockOptions are the optional parts of a Lock.
type LockOptions struct {
	// Wake, from redislock.Client.WatchReleases, lets a blocked standby
	// return at once when the lock is released. Without it standbys
	// notice a release at the key's expiry.
	Wake <-chan struct{}
	// Recorder and Object receive RecordEvent's events (client-go's
	// "became leader" and the like), on Object (the RedisLock). Both or
	// neither.
	Recorder resourcelock.EventRecorder
	Object   runtime.Object
	// Clock must be the redislock.Client's (its Options.Clock): Leading
	// compares its reading with the held lock's deadline, and a standby's
	// Get sleeps on it. Default: clock.RealClock.
	Clock clock.Clock
	// Healthy gates leadership on the app's health. It is called at each
	// acquisition attempt and each renewal (client-go's RetryPeriod): a
	// candidate whose check fails does not acquire, and a leader whose
	// checks have failed for StepDownAfter releases the lock at its next
	// renewal, so that a healthy candidate takes over at once. Leading
	// turns false then, and the Gate refuses writes; client-go ends its
	// leadership within RenewDeadline. Health thus moves leadership at
	// most once per StepDownAfter. Optional.
	Healthy func(ctx context.Context) error
	// StepDownAfter is how long a leader's checks may fail before it
	// steps down; default the ttl. Only with Healthy.
	StepDownAfter time.Duration
	// Admitted, when set, is called after each acquisition, before Create
	// returns: Create waits for it, say for the API server to show this
	// candidate as the holder, so that an admission policy that fences by
	// the holder admits its writes from its first one. When it fails,
	// Create releases the lock and returns its error: no leader is better
	// than one whose writes are refused. Optional.
	Admitted func(ctx context.Context) error
}

// NewLock returns a Lock on the lock called name. ttl is the key's
// lifetime after each acquire or renew and must equal the LeaseDuration
// given to client-go (a LeaderElectionRecord carries whole seconds only, so
// the Lock does not take it from there).
func NewLock(c *redislock.Client, name string, ttl time.Duration, opts LockOptions) (*Lock, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("election: %w: ttl %v is not positive", redislock.ErrInvalidOptions, ttl)
	}
	if err := c.CheckTiming(redislock.Timing{TTL: ttl, RenewInterval: ttl / 4, RenewDeadline: ttl / 2}); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	if (opts.Recorder == nil) != (opts.Object == nil) {
		return nil, fmt.Errorf("election: %w: Recorder and Object go together", redislock.ErrInvalidOptions)
	}
	switch {
	case opts.StepDownAfter < 0:
		return nil, fmt.Errorf("election: %w: StepDownAfter %v is negative", redislock.ErrInvalidOptions, opts.StepDownAfter)
	case opts.StepDownAfter > 0 && opts.Healthy == nil:
		return nil, fmt.Errorf("election: %w: StepDownAfter is set without Healthy", redislock.ErrInvalidOptions)
	case opts.StepDownAfter == 0:
		opts.StepDownAfter = ttl
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Lock{client: c, name: name, ttl: ttl, opts: opts}, nil
}

var _ resourcelock.Interface = (*Lock)(nil)

// Leading reports, from one reading of the clock (at), whether this Lock
// holds the lock and may still believe so: at is before the held lock's
// local deadline. Check it before acting as leader, with the fencing token
// for downstream writes: client-go's own view of leadership can lag behind
// by up to a RetryPeriod after a pause, this one cannot.
func (l *Lock) Leading() (fence int64, at time.Time, ok bool) {
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	at = l.opts.Clock.Now()
	if held == nil || !at.Before(held.Deadline()) {
		return 0, at, false
	}
	return held.Fence(), at, true
}

// Get returns the current record, or a NotFound API error when the lock is
// free. For a standby it blocks while the same other candidate holds the
// lock: until the holder's key is due to expire, a release message, or a
// new holder. A ctx that ends before the key is due (client-go's renew loop
// and its release, bounded by RenewDeadline, of a leader that just lost
// the lock) gets the record at once instead of waiting for nothing. Each
// record it returns is new to client-go, so client-go never judges a lease
// expired by its own clock: Redis decides.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	for {
		h, err := l.client.Inspect(ctx, l.name)
		if err != nil {
			return nil, nil, fmt.Errorf("election: get %q: %w", l.name, err)
		}
		if h.Identity == "" {
			return nil, nil, apierrors.NewNotFound(resource, l.name)
		}
		l.mu.Lock()
		report := h.Identity == l.client.Identity() || h.Identity != l.reported
		l.reported = h.Identity
		l.mu.Unlock()
		free := h.FreeIn
		if h.NoExpiry {
			free = l.ttl // only a release frees it: look again once a ttl
		}
		free += rand.N(l.ttl/200 + 2*time.Millisecond)
		if report || endsBefore(ctx, free) {
			return l.describe(h)
		}
		wait := l.opts.Clock.NewTimer(free)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, nil, fmt.Errorf("election: get %q: %w", l.name, ctx.Err())
		case <-wait.C():
		case <-l.opts.Wake:
			wait.Stop()
		}
	}
}

// endsBefore reports whether ctx's deadline comes within d.
func endsBefore(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < d
}

// describe builds the record client-go sees for holder h.
func (l *Lock) describe(h redislock.Holder) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.record
	if h.Identity != l.client.Identity() || l.held == nil {
		now := metav1.NewTime(l.opts.Clock.Now())
		rec = resourcelock.LeaderElectionRecord{
			HolderIdentity:       h.Identity,
			LeaseDurationSeconds: int(l.ttl.Round(time.Second) / time.Second),
			AcquireTime:          now,
			RenewTime:            now,
			LeaderTransitions:    int(h.Fence),
		}
	}
	l.nonce++
	raw, err := json.Marshal(struct {
		resourcelock.LeaderElectionRecord
		Nonce int64 `json:"nonce"`
	}{rec, l.nonce})
	if err != nil {
		return nil, nil, err
	}
	return &rec, raw, nil
}

// Create acquires the free lock for ler's holder, which must be this
// Lock's identity. A lock held by another gives a Conflict API error.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.client.Identity() {
		return fmt.Errorf("election: create for %q by %q: a Lock acquires only for its own identity", ler.HolderIdentity, l.client.Identity())
	}
	if _, err := l.checkHealth(ctx); err != nil {
		return fmt.Errorf("election: create %q: %w", l.name, err)
	}
	held, err := l.client.Obtain(ctx, l.name, l.ttl)
	if errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, redislock.ErrGuarded) {
		return apierrors.NewConflict(resource, l.name, err)
	}
	if err != nil {
		return fmt.Errorf("election: create %q: %w", l.name, err)
	}
	if l.opts.Admitted != nil {
		if err := l.opts.Admitted(ctx); err != nil {
			if rerr := held.Release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, redislock.ErrNotHeld) {
				err = errors.Join(err, rerr)
			}
			return fmt.Errorf("election: create %q: not admitted: %w", l.name, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.record = held, ler
	return nil
}

// Update renews the lock for the record last read or written (a
// compare-and-pexpire on this Lock's token: a stale leader's write is
// refused with a Conflict API error), or, for a record with no holder,
// releases it (compare-and-delete) and wakes the standbys.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	switch {
	case held == nil && ler.HolderIdentity == "":
		return nil // nothing of ours to release
	case held == nil:
		// client-go thinks the lease expired while Redis still has a
		// holder; only the holder's key expiring can free it.
		return apierrors.NewConflict(resource, l.name, errors.New("held by another candidate"))
	case ler.HolderIdentity == "":
		l.forget()
		if err := held.Release(ctx); err != nil && !errors.Is(err, redislock.ErrNotHeld) {
			return fmt.Errorf("election: release %q: %w", l.name, err)
		}
		return nil
	}
	if failing, err := l.checkHealth(ctx); err != nil && failing >= l.opts.StepDownAfter {
		l.forget()
		if rerr := held.Release(ctx); rerr != nil && !errors.Is(rerr, redislock.ErrNotHeld) {
			return fmt.Errorf("election: step down from %q: %w", l.name, errors.Join(err, rerr))
		}
		// A Conflict, as for a lost lock, that also wraps why.
		return fmt.Errorf("%w: %w", apierrors.NewConflict(resource, l.name, fmt.Errorf("stepped down after %v unhealthy", failing)), err)
	}
	err := held.Refresh(ctx)
	if errors.Is(err, redislock.ErrLockLost) {
		l.forget()
		return apierrors.NewConflict(resource, l.name, err)
	}
	if err != nil {
		return fmt.Errorf("election: renew %q: %w", l.name, err)
	}
	l.mu.Lock()
	l.record = ler
	l.mu.Unlock()
	return nil
}

// checkHealth runs the Healthy check, if any. It returns the check's
// failure, wrapping redislock.ErrUnhealthy, and how long the checks have
// failed, on the Lock's clock.
func (l *Lock) checkHealth(ctx context.Context) (time.Duration, error) {
	if l.opts.Healthy == nil {
		return 0, nil
	}
	err := l.opts.Healthy(ctx)
	now := l.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.unhealthy = time.Time{}
		return 0, nil
	}
	if l.unhealthy.IsZero() {
		l.unhealthy = now
	}
	return now.Sub(l.unhealthy), fmt.Errorf("%w: %w", redislock.ErrUnhealthy, err)
}

func (l *Lock) forget() {
	l.mu.Lock()
	l.held = nil
	l.mu.Unlock()
}

// RecordEvent records a leader-election event through the recorder, if any.
func (l *Lock) RecordEvent(s string) {
	if l.opts.Recorder != nil {
		l.opts.Recorder.Eventf(l.opts.Object, "Normal", "LeaderElection", "%s %s", l.client.Identity(), s)
	}
}

// Identity returns the candidate's identity.
func (l *Lock) Identity() string { return l.client.Identity() }

// Describe names the lock.
func (l *Lock) Describe() string { return "redislock/" + l.name }
