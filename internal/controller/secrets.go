package controller

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretRefresh is how long the controller uses a Secret it read for the
// RedisLocks that work with it before it reads the Secret again. A lock
// that fails (a Secret missing, a key that does not parse, Redis refusing
// the password or unreachable) reads its Secrets anew at its next
// reconcile, so a fix shows at once; a rotation that Redis accepts either
// way shows within SecretRefresh. It bounds the controller's idle reads
// of Secrets to one per Secret per SecretRefresh: at most 0.1 requests a
// minute per lock, for locks that do not share their Secrets.
const SecretRefresh = 10 * time.Minute

// secretCache holds the data of the Secrets RedisLocks name, read through
// the API server without a watch: the controller may get the Secrets it
// is told about, but not list or watch Secrets cluster-wide.
type secretCache struct {
	api   client.Reader
	clock clock.PassiveClock

	mu sync.Mutex
	m  map[types.NamespacedName]cachedSecret
}

type cachedSecret struct {
	data map[string][]byte
	at   time.Time
}

func newSecretCache(api client.Reader, clk clock.PassiveClock) *secretCache {
	return &secretCache{api: api, clock: clk, m: map[types.NamespacedName]cachedSecret{}}
}

// get fills s with Secret key's data, from the cache while it is younger
// than SecretRefresh, else from the API server. A Secret the API server
// does not return is not cached.
func (c *secretCache) get(ctx context.Context, key types.NamespacedName, s *corev1.Secret) error {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && c.clock.Since(e.at) < SecretRefresh {
		*s = corev1.Secret{Data: maps.Clone(e.data)}
		s.Namespace, s.Name = key.Namespace, key.Name
		return nil
	}
	at := c.clock.Now()
	if err := c.api.Get(ctx, key, s); err != nil {
		return err
	}
	c.mu.Lock()
	c.m[key] = cachedSecret{data: maps.Clone(s.Data), at: at}
	c.mu.Unlock()
	return nil
}

// forget drops the cached copies of keys.
func (c *secretCache) forget(keys []types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.m, k)
	}
}

// reader returns the reader of one reconcile: Secrets from the cache,
// every other object from objects (the manager's cache).
func (c *secretCache) reader(objects client.Reader) *secretReader {
	return &secretReader{Reader: objects, secrets: c}
}

// secretReader is a client.Reader that serves Secrets from a secretCache
// and remembers which, so that a reconcile that failed can forget them.
type secretReader struct {
	client.Reader
	secrets *secretCache
	read    []types.NamespacedName
}

func (r *secretReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	r.read = append(r.read, key)
	return r.secrets.get(ctx, key, s)
}

// forget makes the next reconcile read anew the Secrets this one read.
func (r *secretReader) forget() { r.secrets.forget(r.read) }
