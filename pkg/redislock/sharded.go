package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// MaxShards is the most shards a sharded lock may have. Each candidate's
// call holds the server for a time that grows with the shards: about
// 0.25ms for 64 and 0.7ms for 256, and more when the candidates change
// and the assignment is computed again (docs/sharding.md).
const MaxShards = 256

// ShardedOptions configures a Sharded candidate.
type ShardedOptions struct {
	// Name is the sharded lock's name. Its keys are apart from those of
	// a lock of the same name (see keys.go). Required.
	Name string
	// Shards is how many shards the lock splits into, from 1 to MaxShards.
	// Every candidate of a name must ask for the same count: a candidate
	// that asks for another one than the live candidates is refused (its
	// State's Err wraps ErrInvalidOptions) until every candidate with the
	// old count is gone. Required.
	Shards int
	// Timing sets the shards' ttl and how they are renewed; zero fields
	// take Timing's defaults. Every candidate of a name should use the
	// same.
	Timing
	// OnStarted runs in its own goroutine each time this candidate gains
	// a shard. Its context ends when the shard is to move to another
	// candidate, when it is lost, no later than RenewDeadline after the
	// last successful renewal, and when Run ends. It may do the shard's
	// work itself, until its context ends: the shard is given back, and
	// Run returns, only once it has returned. Required.
	OnStarted func(ctx context.Context, s Shard)
	// OnStopped runs each time a shard's context has ended, after that
	// term's OnStarted has returned and before the shard is given back:
	// the handover waits for it to return, so the work it stops has
	// stopped before another candidate gains the shard. Optional.
	OnStopped func(s Shard)
}

// Shard is one shard of a sharded lock, as granted to one candidate.
type Shard struct {
	// Index is the shard's number, from 0 to Shards-1.
	Index int
	// Fence is this grant's fencing token: greater than that of every
	// earlier grant of the same shard (S3).
	Fence int64
}

// HeldShard is a shard a candidate holds at one instant.
type HeldShard struct {
	Shard
	// ValidUntil is when this candidate stops believing it holds the
	// shard unless a renewal succeeds first: the start of the last
	// successful renewal plus RenewDeadline.
	ValidUntil time.Time
}

// ShardedState is what a Sharded candidate knows at one instant.
type ShardedState struct {
	// At is the instant the rest is true of: one reading of the Client's
	// clock, taken before the other fields were decided.
	At time.Time
	// Held lists, by index, the shards this candidate holds at At and
	// whose work runs: not those being handed over.
	Held []HeldShard
	// Members is the number of live candidates, this one included, at
	// the last successful call; 0 before it.
	Members int
	// Err is why the last call did not do all it was asked: Redis
	// unreachable (ErrNoQuorum), the restart guard holding grants back
	// (ErrGuarded), another shard count (ErrInvalidOptions). Nil
	// otherwise.
	Err error
}

// Sharded is one candidate for the shards of a sharded lock. Candidates
// announce themselves on the node, and each computes the same balanced
// assignment of the shards over the live candidates (rendezvous hashing,
// at most ⌈N/R⌉ and at least ⌊N/R⌋ shards each for N shards and R
// candidates). Each renews its membership and every shard it holds in one
// call per RenewInterval, takes the free shards assigned to it, and gives
// back those assigned elsewhere once their work has stopped (OnStopped),
// which wakes the others at once (pub/sub). A candidate that joins or
// leaves thus moves shards within a few round trips; one that crashes
// leaves its shards to be taken when their ttl runs out.
//
// Each shard is a lock of its own, with the guarantees of the package's
// locks: one holder (S1), own release (S2) and fencing tokens (S3), the
// restart guard and WaitReplicas included. Sharded runs on one node (a
// server, a Sentinel-managed master or a Cluster): New with several nodes
// (Redlock) is refused by NewSharded.
type Sharded struct {
	c    *Client
	o    ShardedOptions
	keys [3]string // the state hash, the validity floor, the epoch marker
	args struct{ ttl, shards string }

	mu      sync.Mutex
	terms   map[int]*shardTerm
	members int
	err     error
	// stopped is signalled when a term's work has stopped, so that the
	// shard is given back at once.
	stopped chan struct{}
}

// shardTerm is one grant of a shard to this candidate, from its start to
// its give-back.
type shardTerm struct {
	shard  Shard
	ctx    context.Context
	cancel context.CancelCauseFunc
	// until is the step-down deadline, and lapse the timer that ends ctx
	// then.
	until time.Time
	lapse clock.Timer
	// ended says ctx was cancelled and OnStarted and OnStopped are to
	// return; stopped that they have, and the shard is to be given back.
	// Under Sharded.mu.
	ended, stopped bool
}

// NewSharded checks o and returns a Sharded candidate; it does no I/O.
// Invalid options give an error wrapping ErrInvalidOptions that names the
// rule.
func (c *Client) NewSharded(o ShardedOptions) (*Sharded, error) {
	if err := checkName(o.Name); err != nil {
		return nil, err
	}
	switch {
	case len(c.nodes) != 1:
		return nil, fmt.Errorf("%w: a sharded lock runs on one node (a server, a Sentinel-managed master or a Cluster), not Redlock's %d", ErrInvalidOptions, len(c.nodes))
	case o.Shards < 1 || o.Shards > MaxShards:
		return nil, fmt.Errorf("%w: Shards %d is not from 1 to %d", ErrInvalidOptions, o.Shards, MaxShards)
	case o.OnStarted == nil:
		return nil, fmt.Errorf("%w: OnStarted is nil", ErrInvalidOptions)
	}
	o.Timing = o.Timing.WithDefaults()
	if err := c.CheckTiming(o.Timing); err != nil {
		return nil, err
	}
	k := keysFor(c.opts.KeyPrefix, o.Name)
	s := &Sharded{c: c, o: o, keys: [3]string{k.shards(), k.shardsUntil(), c.epoch(o.Name)}, terms: map[int]*shardTerm{}, stopped: make(chan struct{}, 1)}
	s.args.ttl = strconv.FormatInt(o.TTL.Milliseconds(), 10)
	s.args.shards = strconv.Itoa(o.Shards)
	return s, nil
}

// State returns what the candidate knows now. It reads the clock, so a
// shard leaves Held the instant its step-down deadline passes, even
// before its context is cancelled.
func (s *Sharded) State() ShardedState {
	st := ShardedState{At: s.c.opts.Clock.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Members, st.Err = s.members, s.err
	for _, t := range s.terms {
		if !t.ended && st.At.Before(t.until) {
			st.Held = append(st.Held, HeldShard{t.shard, t.until})
		}
	}
	slices.SortFunc(st.Held, func(a, b HeldShard) int { return a.Index - b.Index })
	return st
}

// Run campaigns until ctx ends, then stops the work of every shard it
// holds (waiting for OnStarted and OnStopped to return), gives them back
// with its membership, and returns nil. Redis faults do not end it: it
// logs them, and tries again after a RenewInterval (jittered) while the
// shards it holds run until their step-down deadlines. It sends one call per RenewInterval, one more per
// change of the candidates or the shards it waits for (a release wakes
// it), and one per batch of shards it gives back.
func (s *Sharded) Run(ctx context.Context) error {
	log := s.c.opts.Logger.WithValues("lock", s.o.Name, "identity", s.c.opts.Identity, "shards", s.o.Shards)
	var b strings.Builder
	writeValue(&b, s.c.opts.Identity)
	value := b.String()
	wake, unwatch := s.c.WatchReleases(ctx, s.o.Name)
	defer unwatch()
	timer := s.c.opts.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.leave(ctx, log, value)
			return nil
		case <-timer.C():
		case <-wake:
		case <-s.stopped:
		}
		if ctx.Err() != nil {
			continue
		}
		// The call below sees every change so far.
		select {
		case <-wake:
		default:
		}
		timer.Stop()
		timer.Reset(s.turn(ctx, log, value))
	}
}

// shardsReply is shards.lua's answer.
type shardsReply struct {
	wait    time.Duration // -1: nothing awaited
	members int
	guard   error
	held    []heldShard
}

type heldShard struct {
	Shard
	keep bool
}

// turn makes one call, applies its answer, and returns how long to wait
// for the next.
func (s *Sharded) turn(ctx context.Context, log logr.Logger, value string) time.Duration {
	clk := s.c.opts.Clock
	give := s.toGiveBack()
	start := clk.Now()
	r, err := s.call(ctx, value, false, give)
	if err != nil {
		s.setErr(log, err)
		if ctx.Err() == nil {
			log.V(1).Info("sharded call failed", "error", err.Error())
		}
		return jitter(s.o.RenewInterval)
	}
	s.setErr(log, r.guard)
	s.apply(ctx, log, start, r, give)
	next := s.o.RenewInterval
	if r.wait >= 0 {
		next = min(next, r.wait+s.o.TTL/200+2*time.Millisecond)
	}
	var guarded *GuardedError
	if errors.As(r.guard, &guarded) {
		next = min(next, guarded.Wait)
	}
	return next
}

// call runs shards.lua once.
func (s *Sharded) call(ctx context.Context, value string, leave bool, give []int) (shardsReply, error) {
	leaving := "0"
	if leave {
		leaving = "1"
	}
	args := make([]any, 0, 11+len(give))
	args = shardsScript.appendArgs(args, s.keys[0], s.keys[1], s.keys[2], value, s.args.ttl, s.c.durable, s.args.shards, leaving)
	for _, i := range give {
		args = append(args, i)
	}
	call, cancel := context.WithTimeout(ctx, s.c.opts.NodeTimeout)
	defer cancel()
	n := s.c.nodes[0]
	v, err := n.eval(call, shardsScript, args)
	if err != nil {
		if strings.HasPrefix(err.Error(), "redislock: shard count") {
			return shardsReply{}, fmt.Errorf("%w: %q: %w", ErrInvalidOptions, s.o.Name, err)
		}
		return shardsReply{}, fmt.Errorf("%w: %s: %w", ErrNoQuorum, n.name, err)
	}
	return s.parse(v)
}

// parse reads shards.lua's reply.
func (s *Sharded) parse(v any) (shardsReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 3 || (len(a)-3)%3 != 0 {
		return shardsReply{}, fmt.Errorf("%w: %q: unexpected reply %v", ErrNoQuorum, s.o.Name, v)
	}
	var r shardsReply
	nums := make([]int64, len(a))
	for i, x := range a {
		if i == 2 {
			continue
		}
		if nums[i], ok = x.(int64); !ok {
			return shardsReply{}, fmt.Errorf("%w: %q: unexpected reply %v", ErrNoQuorum, s.o.Name, v)
		}
	}
	r.wait, r.members = time.Duration(nums[0])*time.Millisecond, int(nums[1])
	if nums[0] < 0 {
		r.wait = -1
	}
	switch g := a[2].(type) {
	case int64:
		if g > 0 {
			r.guard = &GuardedError{Name: s.o.Name, Wait: time.Duration(g) * time.Millisecond}
		}
	case string:
		r.guard = fmt.Errorf("%w: %s", ErrNoQuorum, g)
	}
	seen := make(map[int64]bool, (len(a)-3)/3)
	for i := 3; i < len(a); i += 3 {
		if nums[i] < 0 || nums[i] >= int64(s.o.Shards) || seen[nums[i]] || nums[i+1] < 0 {
			return shardsReply{}, fmt.Errorf("%w: %q: a reply names shard %d (token %d) of %d shards, or twice", ErrNoQuorum, s.o.Name, nums[i], nums[i+1], s.o.Shards)
		}
		seen[nums[i]] = true
		r.held = append(r.held, heldShard{Shard{int(nums[i]), nums[i+1]}, nums[i+2] == 1})
	}
	return r, nil
}

// apply brings the terms in line with a call's answer r, sent at start,
// which gave back the shards in given.
func (s *Sharded) apply(ctx context.Context, log logr.Logger, start time.Time, r shardsReply, given []int) {
	until := start.Add(s.o.RenewDeadline)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members = r.members
	for _, i := range given {
		delete(s.terms, i)
	}
	now := make(map[int]bool, len(r.held))
	for _, h := range r.held {
		now[h.Index] = true
		t := s.terms[h.Index]
		switch {
		case t == nil && h.keep && h.Fence != 0:
			s.startTerm(ctx, log, h.Shard, until)
		case t == nil:
			// Ours in Redis with no work running, or without a token
			// (its counter was deleted): give it back next, to be
			// granted afresh.
			s.terms[h.Index] = &shardTerm{shard: h.Shard, ended: true, stopped: true}
			s.signalStopped()
		case t.ended:
		case t.shard.Fence != h.Fence:
			// Regranted after it ran out in Redis, or its counter was
			// deleted: the old term ends, and the shard goes back to
			// be granted afresh.
			t.end(fmt.Errorf("%w: shard %d of %q ran out and was granted again", ErrLockLost, h.Index, s.o.Name))
		default:
			t.until = until
			t.lapse.Reset(until.Sub(s.c.opts.Clock.Now()))
			if !h.keep {
				t.end(fmt.Errorf("%w: shard %d of %q moves to another candidate", ErrLockLost, h.Index, s.o.Name))
			}
		}
	}
	for i, t := range s.terms {
		if !now[i] && !t.ended {
			t.end(fmt.Errorf("%w: shard %d of %q is no longer this candidate's", ErrLockLost, i, s.o.Name))
		}
	}
}

// startTerm starts the work of a shard just granted, valid until until.
// With s.mu held.
func (s *Sharded) startTerm(ctx context.Context, log logr.Logger, sh Shard, until time.Time) {
	clk := s.c.opts.Clock
	tctx, cancel := context.WithCancelCause(ctx)
	t := &shardTerm{shard: sh, ctx: tctx, cancel: cancel, until: until}
	t.lapse = clk.AfterFunc(until.Sub(clk.Now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.end(fmt.Errorf("%w: shard %d of %q: no renewal succeeded within %v", ErrLockLost, sh.Index, s.o.Name, s.o.RenewDeadline))
	})
	s.terms[sh.Index] = t
	log.V(1).Info("started shard", "shard", sh.Index, "fence", sh.Fence)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		s.o.OnStarted(tctx, sh)
	}()
	go func() {
		<-tctx.Done()
		t.lapse.Stop()
		s.mu.Lock()
		t.ended = true
		s.mu.Unlock()
		// The term's work may be OnStarted itself: it stops first.
		<-ran
		if s.o.OnStopped != nil {
			s.o.OnStopped(sh)
		}
		log.V(1).Info("stopped shard", "shard", sh.Index, "fence", sh.Fence, "reason", context.Cause(tctx).Error())
		s.mu.Lock()
		t.stopped = true
		last := !s.stopping()
		s.mu.Unlock()
		if last {
			// The shards stopped together go back in one call.
			s.signalStopped()
		}
	}()
}

// end ends t's work for cause, with the Sharded's mu held: from now on
// the shard is not reported held, and once OnStopped returns it is given
// back.
func (t *shardTerm) end(cause error) {
	t.ended = true
	t.cancel(cause)
}

// stopping says a term's work is stopping, with s.mu held.
func (s *Sharded) stopping() bool {
	for _, t := range s.terms {
		if t.ended && !t.stopped {
			return true
		}
	}
	return false
}

func (s *Sharded) signalStopped() {
	select {
	case s.stopped <- struct{}{}:
	default:
	}
}

// toGiveBack returns the shards whose work has stopped, once no other's
// is stopping, so that shards stopped together go back in one call.
func (s *Sharded) toGiveBack() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping() {
		return nil
	}
	var give []int
	for i, t := range s.terms {
		if t.stopped {
			give = append(give, i)
		}
	}
	return give
}

// leave stops every term, waits for their work to stop, and gives back
// the shards and the membership.
func (s *Sharded) leave(ctx context.Context, log logr.Logger, value string) {
	// The terms' contexts are ctx's children: they have ended. Wait for
	// their OnStopped.
	for {
		s.mu.Lock()
		busy := false
		for _, t := range s.terms {
			busy = busy || !t.stopped
		}
		s.mu.Unlock()
		if !busy {
			break
		}
		<-s.stopped
	}
	if _, err := s.call(context.WithoutCancel(ctx), value, true, nil); err != nil {
		log.Info("could not give the shards back; they free themselves after the ttl", "error", err.Error())
	}
	s.mu.Lock()
	clear(s.terms)
	s.members = 0
	s.mu.Unlock()
}

// setErr records why the last call did not do all it was asked, and logs
// a new reason once.
func (s *Sharded) setErr(log logr.Logger, err error) {
	s.mu.Lock()
	prev := s.err
	s.err = err
	s.mu.Unlock()
	logChange(log, prev, err, "cannot take shards", "taking shards again")
}
