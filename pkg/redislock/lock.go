package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Lock is one acquisition of a named lock. Its holder may act on the
// protected resource while Valid reports true, and must pass Fence along to
// any downstream system that can reject stale writers.
type Lock struct {
	client   *Client
	keys     lockKeys
	value    string
	metadata string
	fence    int64
	// acquireMs holds acquire.lua's ttl and counter lifetime, in ms, in
	// the Lock, which is allocated anyway, rather than in two allocations
	// of their own. Written once, before the acquisition.
	acquireMs [2]int64

	// refreshing serializes renewals, so that one with a new ttl and the
	// watchdog's cannot overtake each other.
	refreshing sync.Mutex

	mu sync.Mutex
	// ttl is the ttl of the last successful acquire or renew.
	ttl time.Duration
	// renewed is when the last successful acquire or renew was sent; zero
	// once the lock is released or known lost.
	renewed time.Time
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.keys.name }

// Identity returns the holder identity stored with the lock.
func (l *Lock) Identity() string { return l.client.opts.Identity }

// Metadata returns the metadata the lock was obtained with
// (ObtainOptions.Metadata), which observers read with Inspect.
func (l *Lock) Metadata() string { return l.metadata }

// Fence returns the lock's fencing token: greater than the token of every
// earlier acquisition of the same name on the same nodes (S3), as long as the
// nodes keep their data (see the package documentation on persistence).
func (l *Lock) Fence() int64 { return l.fence }

// Deadline returns the local instant, on the Client's monotonic clock, until
// which the holder may believe it holds the lock: the start of the last
// successful acquire or renew, plus the ttl, minus the drift allowance (1%
// of the ttl plus 2ms). It is the zero time once the lock is released or
// known lost.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline()
}

// deadline is Deadline, with l.mu held.
func (l *Lock) deadline() time.Time {
	if l.renewed.IsZero() {
		return time.Time{}
	}
	return l.renewed.Add(l.ttl - drift(l.ttl))
}

// stepDown returns the instant a holder that renews with renewDeadline
// must stop believing: renewDeadline after the last successful acquire or
// renew, and no later than Deadline (which a renewal with a shorter ttl
// may have brought forward). It is the zero time once the lock is
// released or lost.
func (l *Lock) stepDown(renewDeadline time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.deadline()
	if d.IsZero() {
		return d
	}
	if until := l.renewed.Add(renewDeadline); until.Before(d) {
		return until
	}
	return d
}

// TTL reads from Redis how long the lock has left: the time until fewer
// than a majority of nodes hold its key, if it is not renewed (on one node,
// the key's PTTL). It is what the nodes say, not what the holder may
// believe: that ends earlier, at Deadline. It returns the largest duration
// when the keys have no expiry, an error wrapping ErrLockLost when more
// than N-quorum nodes no longer hold the lock's token (the lock is then
// invalid), and one wrapping ErrNoQuorum when too few nodes answered.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	c := l.client
	replies, buf := c.each(ctx, c.all, lockTTLScript, &l.keys.lock, &l.value)
	defer c.done(buf)
	var left []time.Duration
	gone := 0
	for _, r := range replies {
		switch ms, ok := r.val.(int64); {
		case !ok:
		case ms == -1:
			left = append(left, noExpiry)
		case ms < 0:
			gone++
		default:
			left = append(left, time.Duration(ms)*time.Millisecond)
		}
	}
	switch {
	case len(left) >= c.quorum:
		// The quorum-th longest: until then a majority holds the key.
		slices.Sort(left)
		return left[len(left)-c.quorum], nil
	case gone > len(c.nodes)-c.quorum:
		l.invalidate()
		return 0, fmt.Errorf("%w: %q: %d of %d nodes no longer hold its token", ErrLockLost, l.keys.name, gone, len(c.nodes))
	}
	return 0, fmt.Errorf("ttl of %q: %w", l.keys.name, nodeErrors(ErrNoQuorum, replies))
}

// Valid reports whether the local deadline is still ahead. It reads the
// clock on every call, so a process that wakes from a pause past the
// deadline sees false at once, before any timer has fired.
func (l *Lock) Valid() bool {
	d := l.Deadline()
	return !d.IsZero() && l.client.opts.Clock.Now().Before(d)
}

// Obtain tries once to acquire the lock called name for ttl: SET NX PX with
// a fresh token on every node at once, each bounded by NodeTimeout. It
// succeeds when a majority granted it and time is left of the ttl after the
// elapsed time and the drift allowance; otherwise it releases what it took
// and returns an error wrapping ErrNotObtained (held by another),
// ErrGuarded (free, but held back for a while, by the restart guard or
// because its key vanished before its holder's time was up: a
// *GuardedError says how long) or ErrNoQuorum (too few nodes answered, or
// too slowly).
func (c *Client) Obtain(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	l, _, err := c.obtain(ctx, name, ttl, "")
	return l, err
}

// held describes the holder a failed acquisition found.
type held struct {
	// value the holder stored, on the most nodes; identity is parsed
	// from it, "" if it is not ours to parse.
	value    string
	identity string
	// free is how long until enough of the holder's keys expire for a
	// majority to be free, if the holder does not renew.
	free time.Duration
	// fence is the greatest fencing counter on the holder's nodes: its
	// token.
	fence int64
	// split says no value holds a majority: candidates split the nodes
	// among them (each gives its share back, or lets it expire), or a
	// holder lost keys. No one may lead until that changes, and the
	// candidates that found it should back off at random rather than
	// meet again.
	split bool
	// vanished says the lock is held back because its key vanished (DEL,
	// eviction, force-release) before its holder's time was up.
	vanished bool
}

func (c *Client) obtain(ctx context.Context, name string, ttl time.Duration, metadata string) (*Lock, held, error) {
	if err := c.checkObtain(name, ttl, metadata); err != nil {
		return nil, held{}, err
	}
	clock := c.opts.Clock
	start := clock.Now()
	l, h, err := c.acquire(ctx, name, ttl, metadata, start)
	c.opts.Metrics.Acquire(name, clock.Now().Sub(start), err)
	return l, h, err
}

// checkObtain checks the arguments of an acquisition, one message per
// broken rule.
func (c *Client) checkObtain(name string, ttl time.Duration, metadata string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := c.checkTTL(ttl); err != nil {
		return err
	}
	return checkMetadata(metadata)
}

// MaxMetadataLen is the longest metadata, in bytes, a lock can carry.
const MaxMetadataLen = 4096

func checkMetadata(md string) error {
	if len(md) > MaxMetadataLen {
		return fmt.Errorf("%w: Metadata is %d bytes, longer than %d", ErrInvalidOptions, len(md), MaxMetadataLen)
	}
	return nil
}

func (c *Client) checkTTL(ttl time.Duration) error {
	if err := validTTL(ttl); err != nil {
		return err
	}
	if c.opts.NodeTimeout >= ttl {
		return fmt.Errorf("%w: NodeTimeout %v is not shorter than TTL %v", ErrInvalidOptions, c.opts.NodeTimeout, ttl)
	}
	return nil
}

func (c *Client) acquire(ctx context.Context, name string, ttl time.Duration, metadata string, start time.Time) (*Lock, held, error) {
	keys, value := newAcquisition(c.opts.KeyPrefix, name, c.opts.Identity)
	l := &Lock{client: c, keys: keys, value: value, metadata: metadata, ttl: ttl}
	l.acquireMs = [2]int64{ttl.Milliseconds(), c.fenceLife(ttl).Milliseconds()}
	ttlMs, fenceMs := &l.acquireMs[0], &l.acquireMs[1]
	l.keys.epoch = c.epoch(name)
	replies, buf := c.each(ctx, c.all, acquireScript, &l.keys.lock, &l.keys.fence, &l.keys.until, &l.keys.meta, &l.keys.epoch, &l.value, ttlMs, &c.durable, fenceMs, &l.metadata, &c.announce)
	defer c.done(buf)
	var (
		took    []int
		holders []heldReply
	)
	for i, r := range replies {
		switch v := r.val.(type) {
		case int64:
			took = append(took, i)
			l.fence = max(l.fence, v)
		case []any:
			h, err := parseHeld(v)
			switch {
			case err != nil:
				replies[i].err = fmt.Errorf("%s: %w", c.nodes[i].name, err)
			case h.value == l.value:
				// Our own SET, applied by an earlier try whose
				// reply was lost: the key is ours.
				took = append(took, i)
				replies[i].val = h.counter
				l.fence = max(l.fence, h.counter)
			default:
				holders = append(holders, h)
			}
		case nil:
		default:
			replies[i].err = fmt.Errorf("%s: %w: acquire replied %T", c.nodes[i].name, ErrMalformedValue, v)
		}
	}
	if len(took) >= c.quorum {
		err := c.commitFence(ctx, l, took, replies, *fenceMs)
		if err == nil {
			if c.opts.Clock.Now().Before(start.Add(ttl - drift(ttl))) {
				l.renewed = start
				c.announceGrant(ctx, l, took)
				return l, held{}, nil
			}
			err = fmt.Errorf("%w: acquiring took longer than ttl %v less drift", ErrNoQuorum, ttl)
		}
		c.giveBack(ctx, l, c.all)
		return nil, held{}, err
	}
	// Give back at once what we took, and what we may have taken on the
	// nodes that did not answer.
	c.giveBack(ctx, l, notHolding(replies))
	if len(holders) > len(c.nodes)-c.quorum {
		h, err := c.describeHolder(holders)
		if err != nil {
			return nil, h, fmt.Errorf("%w: %q is held by a value this package did not write: %w", ErrNotObtained, keys.name, err)
		}
		if h.value == "" {
			return nil, h, &GuardedError{Name: keys.name, Wait: h.free, KeyVanished: h.vanished}
		}
		return nil, h, fmt.Errorf("%w: %q is held by %q", ErrNotObtained, keys.name, h.identity)
	}
	return nil, held{}, nodeErrors(ErrNoQuorum, replies)
}

// commitFence makes sure a majority of nodes know l's fencing token before
// its holder may use it. On each node that granted the lock, acquire
// incremented that node's counter; the token is the largest of them. Where
// all granting nodes agree (always with one node, and whenever every
// earlier acquisition reached every node) a majority already knows it.
// Otherwise fence.lua raises the lower counters, and any later majority,
// which must overlap this one, starts above the token (S3).
func (c *Client) commitFence(ctx context.Context, l *Lock, took []int, replies []reply, fenceMs int64) error {
	var behind []int
	for _, i := range took {
		if replies[i].val.(int64) < l.fence {
			behind = append(behind, i)
		}
	}
	if len(behind) == 0 {
		return nil
	}
	raised, buf := c.each(ctx, behind, fenceScript, &l.keys.lock, &l.keys.fence, &l.value, &l.fence, &fenceMs)
	defer c.done(buf)
	known := len(took) - len(behind)
	for _, i := range behind {
		if v, _ := raised[i].val.(int64); v == 1 {
			known++
		}
	}
	if known < c.quorum {
		return fmt.Errorf("fencing token %d reached %d of %d nodes: %w", l.fence, known, c.quorum, nodeErrors(ErrNoQuorum, raised))
	}
	return nil
}

// heldReply is acquire.lua's answer from a node that did not grant the
// lock: taken by a holder, or held back (guarded) after the node's
// (re)start or because the lock key vanished before its holder's time was
// up.
type heldReply struct {
	counter  int64
	pttl     time.Duration // negative when the key has no expiry; the wait when guarded
	value    string        // "" when guarded
	guarded  bool
	vanished bool   // guarded for a vanished key, not by the restart guard
	meta     string // the holder's metadata, read by Inspect only
}

func parseHeld(v []any) (heldReply, error) {
	if len(v) == 2 {
		reason, ok1 := v[0].(int64)
		wait, ok2 := v[1].(int64)
		if !ok1 || !ok2 {
			return heldReply{}, fmt.Errorf("%w: acquire replied held back %T, %T", ErrMalformedValue, v[0], v[1])
		}
		return heldReply{pttl: time.Duration(wait) * time.Millisecond, guarded: true, vanished: reason == 1}, nil
	}
	if len(v) != 3 {
		return heldReply{}, fmt.Errorf("%w: acquire replied %d elements, want 2 or 3", ErrMalformedValue, len(v))
	}
	counter, ok1 := v[0].(int64)
	pttl, ok2 := v[1].(int64)
	if !ok1 || !ok2 {
		return heldReply{}, fmt.Errorf("%w: acquire replied counter %T, PTTL %T", ErrMalformedValue, v[0], v[1])
	}
	value, _ := v[2].(string)
	return heldReply{counter: counter, pttl: time.Duration(pttl) * time.Millisecond, value: value}, nil
}

// noExpiry is the wait for a key that never expires.
const noExpiry = time.Duration(1<<63 - 1)

// describeHolder tells who holds the lock on the nodes that refused it and
// when a majority of them will be free. The holder is the value seen on
// the most of them; an error wrapping ErrMalformedValue says it is not
// ours to parse.
func (c *Client) describeHolder(hs []heldReply) (held, error) {
	// A majority is free once free nodes plus expired holders reach the
	// quorum: wait for the need-th shortest PTTL.
	need := c.quorum - (len(c.nodes) - len(hs))
	pttls := make([]time.Duration, len(hs))
	counts := map[string]int{}
	top := ""
	vanished := false
	for i, h := range hs {
		pttls[i] = h.pttl
		if h.pttl < 0 { // no expiry: PERSIST, or a key we did not write
			pttls[i] = noExpiry
		}
		if h.guarded {
			vanished = vanished || h.vanished
			continue
		}
		counts[h.value]++
		if counts[h.value] > counts[top] {
			top = h.value
		}
	}
	slices.Sort(pttls)
	h := held{value: top, free: pttls[need-1], split: counts[top] < c.quorum}
	if len(counts) == 0 {
		// Every refusal held the lock back: the restart guard, or a
		// vanished key's validity.
		h.split, h.vanished = false, vanished
		return h, nil
	}
	// The nodes of the holder's acquisition count at most its token (the
	// largest of their counts), and those its fencing commit raised
	// exactly the token: the greatest is the token, from the moment the
	// acquisition's replies are in, so an observer sees one token per
	// holder, not one before the commit and another after it. Holder
	// repair sets a node's counter to the token too, unless the node
	// counted past it (attempts whose keys expired before they gave them
	// back; see restore.lua): the greatest is then that count.
	for _, hr := range hs {
		if hr.value == top {
			h.fence = max(h.fence, hr.counter)
		}
	}
	v, err := parseValue(top)
	if err != nil {
		return h, err
	}
	h.identity = v.Identity
	return h, nil
}

// notHolding lists the nodes that did not report another holder.
func notHolding(replies []reply) []int {
	var idx []int
	for i := range replies {
		if _, refused := replies[i].val.([]any); !refused {
			idx = append(idx, i)
		}
	}
	return idx
}

// Refresh extends the lock to its ttl from now (the ttl it was obtained
// with, or the last one RefreshTTL set), by compare-and-pexpire on
// every node. On success the local deadline moves forward, and where a node
// no longer has the key at all (Redlock: a split vote left it free, it was
// deleted, the node restarted) Refresh puts it back with the lock's fencing
// token, so that one lost key does not split the nodes for the rest of the
// leadership; a node that another candidate holds is left alone. It never
// re-creates a key to save a renewal: only nodes that still held the token
// count toward its success. It returns an error wrapping ErrLockLost when the
// local deadline has passed or more than N-quorum nodes no longer hold the
// lock's token (the lock is then lost for good), and one wrapping
// ErrNoQuorum when too few nodes answered (the deadline stays; try again).
func (l *Lock) Refresh(ctx context.Context) error {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	return l.refreshTTL(ctx, ttl)
}

// RefreshTTL is Refresh with a new ttl, which later renewals (Refresh, a
// Watchdog) keep: on success the local deadline becomes the start of this
// renewal plus ttl less drift, earlier than before when ttl is shorter. A
// failed renewal with a shorter ttl brings the deadline forward to what
// ttl would give, if that is earlier; it never moves it later. Redis never
// shortens a key: a shorter ttl takes effect there once the longer expiry
// has run down to it, so other candidates may wait up to the longer one
// (a renewal delayed in the network, run after a later one, must not cut
// short what the holder counts on). A Watchdog running meanwhile keeps its
// timing; its step-down follows its own renewals. Keep a holder's ttl at
// most the ttl its rivals ask for: a node's restart guard waits the ttl of
// the candidate asking, so after a restart without persistence a rival with
// a shorter ttl could be granted while this holder still believes.
// The ttl follows Obtain's rules (positive, whole milliseconds, longer
// than NodeTimeout); otherwise the error wraps ErrInvalidOptions.
func (l *Lock) RefreshTTL(ctx context.Context, ttl time.Duration) error {
	if err := l.client.checkTTL(ttl); err != nil {
		return err
	}
	return l.refreshTTL(ctx, ttl)
}

func (l *Lock) refreshTTL(ctx context.Context, ttl time.Duration) error {
	l.refreshing.Lock()
	defer l.refreshing.Unlock()
	c := l.client
	clock := c.opts.Clock
	start := clock.Now()
	err := l.refresh(ctx, start, ttl)
	c.opts.Metrics.Renew(l.keys.name, clock.Now().Sub(start), err)
	if errors.Is(err, ErrLockLost) {
		c.opts.Metrics.Lost(l.keys.name)
	}
	return err
}

func (l *Lock) refresh(ctx context.Context, start time.Time, ttl time.Duration) error {
	if !l.Valid() {
		l.invalidate()
		return fmt.Errorf("%w: %q: its local deadline has passed", ErrLockLost, l.keys.name)
	}
	c := l.client
	ttlMs, fenceMs := ttl.Milliseconds(), c.fenceLife(ttl).Milliseconds()
	var (
		replies []reply
		buf     *replyBuf
	)
	if l.metadata == "" { // no metadata key: see script.bare
		replies, buf = c.each(ctx, c.all, renewScript.bare, &l.keys.lock, &l.keys.until, &l.keys.fence, &l.value, &ttlMs, &fenceMs)
	} else {
		replies, buf = c.each(ctx, c.all, renewScript, &l.keys.lock, &l.keys.until, &l.keys.fence, &l.keys.meta, &l.value, &ttlMs, &fenceMs)
	}
	defer c.done(buf)
	ok, gone := 0, 0
	var missing []int
	for i, r := range replies {
		switch r.val {
		case int64(1):
			ok++
		case int64(0):
			gone++
		case int64(-1):
			gone++
			missing = append(missing, i)
		}
	}
	switch {
	case ok >= c.quorum:
		l.mu.Lock()
		held := !l.renewed.IsZero()
		if held {
			l.renewed, l.ttl = start, ttl
		}
		l.mu.Unlock()
		if held { // not released or lost meanwhile
			l.restore(ctx, missing, ttlMs, fenceMs)
		}
		return nil
	case gone > len(c.nodes)-c.quorum:
		l.invalidate()
		return fmt.Errorf("%w: %q: %d of %d nodes no longer hold its token", ErrLockLost, l.keys.name, gone, len(c.nodes))
	default:
		l.shorten(start, ttl)
		return fmt.Errorf("renew %q: %w", l.keys.name, nodeErrors(ErrNoQuorum, replies))
	}
}

// shorten brings the deadline forward to what a renewal sent at start
// with ttl would give, if that is earlier: after a renewal that failed
// with a shorter ttl, some nodes may have shortened their keys.
func (l *Lock) shorten(start time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.deadline(); !d.IsZero() && start.Add(ttl-drift(ttl)).Before(d) {
		l.renewed, l.ttl = start, ttl
	}
}

// restore puts l's key back on the nodes in idx, where a renewal a majority
// confirmed found it missing (Redlock holder repair). Without it a key lost
// on one node (a split vote, a DEL, a restart) stays lost for as long as l
// is held, and every standby's attempt takes that node and gives it back.
// The outcome changes nothing about l's validity, so a failure is only
// logged: the next renewal tries again.
func (l *Lock) restore(ctx context.Context, idx []int, ttlMs, fenceMs int64) {
	if len(idx) == 0 {
		return
	}
	c := l.client
	replies, buf := c.each(ctx, idx, restoreScript, &l.keys.lock, &l.keys.fence, &l.keys.until, &l.keys.meta, &l.value, &ttlMs, &l.fence, &fenceMs, &l.metadata)
	defer c.done(buf)
	var errs []error
	for _, i := range idx {
		switch {
		case replies[i].val == int64(1):
			c.opts.Logger.Info("restored the lock on a node where it had gone missing", "lock", l.keys.name, "node", c.nodes[i].name, "fence", l.fence)
		case replies[i].err != nil:
			errs = append(errs, replies[i].err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.opts.Logger.V(1).Info("could not restore the lock on a node where it went missing; the next renewal tries again", "lock", l.keys.name, "error", err.Error())
	}
}

func (l *Lock) invalidate() {
	l.mu.Lock()
	l.renewed = time.Time{}
	l.mu.Unlock()
}

// Release gives the lock up by compare-and-delete on every node, and wakes
// the candidates waiting for it. It never deletes a key that holds another
// token. The lock is invalid afterwards, whatever the outcome. It returns
// an error wrapping ErrNotHeld when no node still held the token, and one
// wrapping ErrNoQuorum when some nodes could not be reached (their keys
// expire by themselves within the ttl).
func (l *Lock) Release(ctx context.Context) error {
	l.invalidate()
	return l.client.release(ctx, l, l.client.all)
}

func (c *Client) release(ctx context.Context, l *Lock, idx []int) error {
	if l.metadata == "" { // no metadata key: see script.bare
		return c.deleteKeys(ctx, l, idx, releaseScript.bare, &l.keys.lock, &l.keys.until, &l.value)
	}
	return c.deleteKeys(ctx, l, idx, releaseScript, &l.keys.lock, &l.keys.until, &l.keys.meta, &l.value)
}

// deleteKeys runs a compare-and-delete script (release.lua or giveback.lua)
// for l on the nodes in idx and reports the outcome as Release does.
func (c *Client) deleteKeys(ctx context.Context, l *Lock, idx []int, s *script, keysAndArgs ...any) error {
	replies, buf := c.each(ctx, idx, s, keysAndArgs...)
	defer c.done(buf)
	deleted, failed := 0, 0
	for _, r := range replies {
		if r.val == int64(1) {
			deleted++
		}
		if r.err != nil {
			failed++
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("release %q: %w", l.keys.name, nodeErrors(ErrNoQuorum, replies))
	case deleted == 0:
		return fmt.Errorf("%w: %q had expired", ErrNotHeld, l.keys.name)
	}
	return nil
}

// giveBack undoes a failed acquisition's keys and fencing counts
// (giveback.lua) in the background, so that the failure is reported without
// waiting on slow nodes, and even when ctx is already cancelled. It wakes no
// one: only a holder's release does. It logs what it could not reach; those
// keys expire by themselves within the ttl.
func (c *Client) giveBack(ctx context.Context, l *Lock, idx []int) {
	if len(idx) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		var err error
		if l.metadata == "" { // no metadata key: see script.bare
			err = c.deleteKeys(ctx, l, idx, givebackScript.bare, &l.keys.lock, &l.keys.fence, &l.keys.until, &l.value, &l.acquireMs[0])
		} else {
			err = c.deleteKeys(ctx, l, idx, givebackScript, &l.keys.lock, &l.keys.fence, &l.keys.until, &l.keys.meta, &l.value, &l.acquireMs[0])
		}
		if err != nil && !errors.Is(err, ErrNotHeld) {
			c.opts.Logger.V(1).Info("could not give back a failed acquisition; its keys expire within the ttl", "lock", l.keys.name, "error", err.Error())
		}
	}()
}
