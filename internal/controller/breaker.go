package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// errNotAsked is what a reconcile records when it did not contact its
// lock's Redis because the same connection did not answer other locks just
// before (the connection's breaker is open). It wraps
// redislock.ErrNoQuorum, so the status shows Redis unreachable, the last
// holder kept, and the lock is looked at again as an unreachable one is.
var errNotAsked = fmt.Errorf("%w: Redis not contacted: this connection's servers failed to answer %d reconciles in a row; the next try is at most %v away", redislock.ErrNoQuorum, breakerTrips, breakerOpen)

const (
	// breakerTrips is how many reconciles in a row must find a
	// connection's servers not answering before the others stop trying.
	breakerTrips = 2
	// breakerOpen is how long they stop trying, before one reconcile
	// tries again (and the rest wait for its outcome).
	breakerOpen = 5 * time.Second
)

// breakers holds a circuit breaker per connection config (its Key), so
// that the many locks of a server that does not answer cost one nodeTimeout
// per breakerOpen, not one each: the others fail fast, and their workers go
// to other locks. A breaker lives while a RedisLock uses its config.
type breakers struct {
	mu    sync.Mutex
	byKey map[string]*breakerEntry
	users map[types.NamespacedName]string // config key of each RedisLock
}

type breakerEntry struct {
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	users map[types.NamespacedName]bool
}

func newBreakers() *breakers {
	return &breakers{byKey: map[string]*breakerEntry{}, users: map[types.NamespacedName]string{}}
}

// allow reports whether nn may contact the servers of config key now. If
// so, done must be called once with the outcome of its Redis calls; if
// not, err is errNotAsked.
func (b *breakers) allow(nn types.NamespacedName, key string) (done func(error), err error) {
	b.mu.Lock()
	if old, ok := b.users[nn]; ok && old != key {
		b.detach(nn, old)
	}
	e := b.byKey[key]
	if e == nil {
		e = &breakerEntry{users: map[types.NamespacedName]bool{}, cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Timeout:      breakerOpen,
			ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerTrips },
			IsSuccessful: func(err error) bool { return err == nil || !unanswered(err) },
		})}
		b.byKey[key] = e
	}
	e.users[nn] = true
	b.users[nn] = key
	b.mu.Unlock()
	done, err = e.cb.Allow()
	if err != nil {
		return nil, errNotAsked
	}
	return done, nil
}

// forget drops nn, and the breaker of its config when nn was its last
// user.
func (b *breakers) forget(nn types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if key, ok := b.users[nn]; ok {
		b.detach(nn, key)
	}
}

// detach removes nn from the breaker of key; b.mu is held.
func (b *breakers) detach(nn types.NamespacedName, key string) {
	delete(b.users, nn)
	if e := b.byKey[key]; e != nil {
		if delete(e.users, nn); len(e.users) == 0 {
			delete(b.byKey, key)
		}
	}
}

// unanswered reports whether err says the servers did not answer (or
// answered with something other than Redis), as opposed to a spec, Secret
// or API error, or the controller stopping, which say nothing of them.
func unanswered(err error) bool {
	var api apierrors.APIStatus
	return !isSpecError(err) && !errors.Is(err, redislock.ErrMalformedValue) && !errors.Is(err, context.Canceled) && !errors.As(err, &api)
}

// isSpecError reports whether err says that the spec, its Secrets or the
// controller's policy keep the lock's Redis from being used: waiting does
// not help.
func isSpecError(err error) bool {
	for _, spec := range []error{redisconn.ErrSecret, redisconn.ErrConnection, redisconn.ErrInvalidSpec, redislock.ErrInvalidOptions, ErrDestinationNotAllowed} {
		if errors.Is(err, spec) {
			return true
		}
	}
	return false
}
