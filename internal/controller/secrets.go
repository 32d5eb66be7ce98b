package controller

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
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

// secretCacheSize bounds how many Secrets the controller keeps: more than
// one per lock at the 10,000 locks the controller is built for. Past it,
// the least recently used go first and are read again when next needed.
const secretCacheSize = 16384

// secretCache holds the data of the Secrets RedisLocks name, read through
// the API server without a watch: the controller may get the Secrets it
// is told about, but not list or watch Secrets cluster-wide. The Secrets
// of deleted locks age out.
type secretCache struct {
	api   client.Reader
	cache *utilcache.LRUExpireCache // types.NamespacedName -> map[string][]byte
}

func newSecretCache(api client.Reader, clk utilcache.Clock) *secretCache {
	return &secretCache{api: api, cache: utilcache.NewLRUExpireCacheWithClock(secretCacheSize, clk)}
}

// get fills s with Secret key's data, from the cache for SecretRefresh
// after it was read, else from the API server. A Secret the API server
// does not return is not cached.
func (c *secretCache) get(ctx context.Context, key types.NamespacedName, s *corev1.Secret) error {
	if data, ok := c.cache.Get(key); ok {
		*s = corev1.Secret{Data: maps.Clone(data.(map[string][]byte))}
		s.Namespace, s.Name = key.Namespace, key.Name
		return nil
	}
	if err := c.api.Get(ctx, key, s); err != nil {
		return err
	}
	// LRUExpireCache serves an entry through its expiry instant; the
	// Secret is due again at SecretRefresh.
	c.cache.Add(key, maps.Clone(s.Data), SecretRefresh-time.Nanosecond)
	return nil
}

// forget drops the cached copies of keys.
func (c *secretCache) forget(keys []types.NamespacedName) {
	for _, k := range keys {
		c.cache.Remove(k)
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
