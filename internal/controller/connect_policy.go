package controller

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redisconn"
)

// ErrInlineRedis is wrapped by the error of a RedisLock with an inline
// spec.redis when ConnectPolicy.ForbidInlineRedis is set.
var ErrInlineRedis = errors.New("controller: inline spec.redis not allowed")

// ReasonInlineRedisForbidden is the Ready condition's reason for such a
// lock.
const ReasonInlineRedisForbidden = "InlineRedisForbidden"

// ConnectPolicy is what a RedisLock may make the controller connect to,
// from the controller's network position, which a tenant's own pods may
// not share. The zero value allows anything.
type ConnectPolicy struct {
	// ForbidInlineRedis refuses RedisLocks whose spec.redis names the
	// servers themselves (-allow-inline-redis=false): such a lock is not
	// Ready (InlineRedisForbidden) and Redis is not asked, nor its Secrets
	// read; locks must name a RedisConnection or ClusterRedisConnection,
	// which the platform's admins write.
	ForbidInlineRedis bool
	// Destinations, when not nil, refuses every connection to an address
	// outside it (-redis-allowed-destinations); see Destinations.
	Destinations *Destinations
}

// resolve is redisconn.Resolve of rl under p: an error wrapping
// ErrInlineRedis (and redisconn.ErrInvalidSpec, which waiting does not
// fix) for a lock p forbids, else a Config whose clients dial only the
// destinations p allows.
func (p ConnectPolicy) resolve(ctx context.Context, r client.Reader, rl *v1alpha1.RedisLock) (redisconn.Config, error) {
	if p.ForbidInlineRedis && rl.Spec.ConnectionRef == nil && rl.Spec.Redis != nil {
		return redisconn.Config{}, inlineRedisError{}
	}
	cfg, err := redisconn.Resolve(ctx, r, rl)
	if p.Destinations != nil {
		cfg.CheckDestination = p.Destinations.Check
	}
	return cfg, err
}

// inlineRedisError is the error of a lock ForbidInlineRedis refuses.
type inlineRedisError struct{}

func (inlineRedisError) Error() string {
	return "spec.redis: this controller connects to Redis only through a RedisConnection or ClusterRedisConnection (spec.connectionRef) that your platform's admins made: it runs with -allow-inline-redis=false"
}

// Unwrap returns ErrInlineRedis and redisconn.ErrInvalidSpec.
func (inlineRedisError) Unwrap() []error { return []error{ErrInlineRedis, redisconn.ErrInvalidSpec} }
