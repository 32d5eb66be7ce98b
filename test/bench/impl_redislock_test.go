package bench

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	"github.com/redislock/redislock/pkg/redislock"
)

// ours is our package: one node, or Redlock over N nodes.
type ours struct {
	clients []*redis.Client
	lc      *redislock.Client
}

func newOurs(addrs []string) (locker, error) { return openOurs(addrs, redislock.Options{}) }

// newOursDurable is our package with the restart guard off
// (AssumeDurable), to show what the guard costs on fresh names.
func newOursDurable(addrs []string) (locker, error) {
	return openOurs(addrs, redislock.Options{AssumeDurable: true})
}

// newOursWaiting is our package waiting for the node's replicas after each
// write (Options.WaitReplicas), to show what a grant costs with the
// Sentinel and Cluster default (redislock.WaitAllReplicas) and a fixed 1.
func newOursWaiting(wait int) newLocker {
	return func(addrs []string) (locker, error) { return openOurs(addrs, redislock.Options{WaitReplicas: wait}) }
}

// openOurs opens our package on addrs with o, its Identity set.
func openOurs(addrs []string, o redislock.Options) (locker, error) {
	cs := newClients(addrs)
	nodes := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		nodes[i] = c
	}
	o.Identity = "bench"
	lc, err := redislock.New(nodes, &o)
	if err != nil {
		_ = closeClients(cs)
		return nil, err
	}
	return &ours{clients: cs, lc: lc}, nil
}

func (o *ours) acquireRelease(ctx context.Context, key string) error {
	l, err := o.lc.Obtain(ctx, key, ttl)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (o *ours) close() error { return closeClients(o.clients) }

// watched is our package while the controller's subscription listens on
// the node: a PSUBSCRIBE to every lock's events channel, as the
// controller's live status keeps (internal/controller/clients.go), so that each
// acquire and release also pays the pattern match and the delivery. Its
// keys have a prefix of their own, so the messages of the other
// implementations on the node are not delivered to it.
type watched struct {
	*ours
	sub  *redis.PubSub
	done chan struct{}
}

const watchedPrefix = "watched:"

func newWatched(addrs []string) (locker, error) {
	l, err := openOurs(addrs, redislock.Options{KeyPrefix: watchedPrefix})
	if err != nil {
		return nil, err
	}
	o := l.(*ours)
	sub := o.clients[0].PSubscribe(context.Background(), watchedPrefix+"{*}:events")
	if _, err := sub.Receive(context.Background()); err != nil {
		_ = sub.Close()
		_ = o.close()
		return nil, err
	}
	w := &watched{ours: o, sub: sub, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for range sub.Channel() {
		}
	}()
	return w, nil
}

func (w *watched) close() error {
	err := w.sub.Close()
	<-w.done
	return errors.Join(err, w.ours.close())
}
