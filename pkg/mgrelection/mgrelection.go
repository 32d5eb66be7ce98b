// Package mgrelection replaces a controller-runtime manager's Lease
// election with a Redis lock declared by a RedisLock resource: ForRedisLock
// reads the resource and its Secrets, and Election.Apply sets the manager
// options. The lock itself is election.Lock, which needs no
// controller-runtime; use it directly to elect with client-go alone.
package mgrelection

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/redislock/redislock/pkg/election"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// Sentinel errors. ForRedisLock's errors wrap one of them, a redislock
// sentinel (ErrInvalidOptions, ErrNoQuorum, ErrEvictionPolicy...) or an API
// error (a NotFound RedisLock), so that callers can tell them apart with
// errors.Is. They are redisconn's, which reads the RedisLock, under the
// names this package has always given them.
var (
	// ErrSecret means a Secret the RedisLock names is missing, or lacks
	// the key it names.
	ErrSecret = redisconn.ErrSecret
	// ErrInvalidSpec means the RedisLock breaks a rule the API server
	// cannot check (say, an address that does not parse).
	ErrInvalidSpec = redisconn.ErrInvalidSpec
	// ErrConnection means the RedisConnection or ClusterRedisConnection
	// the RedisLock's spec.connectionRef names does not exist.
	ErrConnection = redisconn.ErrConnection
)

// Election is leader election on one RedisLock, ready for a
// controller-runtime manager.
type Election struct {
	// Lock is the resourcelock.Interface.
	Lock *election.Lock
	// LeaseDuration, RenewDeadline and RetryPeriod are the RedisLock's
	// ttl, renewDeadline and renewInterval.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	close func()
}

// ForRedisLock reads the RedisLock ref, the connection it names and their
// Secrets through cfg (the candidate needs get on redislocks, secrets and
// redisconnections, and create on events, in ref's namespace, election
// events going on the RedisLock; for a lock on a ClusterRedisConnection,
// get on it and on its Secrets in their namespace; and for a lock of scope
// Cluster, get on namespace kube-system, whose UID names the cluster) and
// returns an Election for identity; "" means the POD_NAME environment
// variable, else the hostname (redislock.Options' default). Close it after the manager stops.
func ForRedisLock(ctx context.Context, cfg *rest.Config, ref types.NamespacedName, identity string, opts ...Option) (*Election, error) {
	c, err := redisconn.NewAPIClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("mgrelection: %w", err)
	}
	cand, err := redisconn.OpenCandidate(ctx, c, ref, "", redislock.Options{Identity: identity})
	if err != nil {
		return nil, fmt.Errorf("mgrelection: %w", err)
	}
	rl, lc, t, name := cand.Object, cand.Client, cand.Timing, cand.Name
	wake, unsubscribe := lc.WatchReleases(context.WithoutCancel(ctx), name)
	// client-go's election events ("<identity> became leader") go on the
	// RedisLock, as Lease election puts them on the Lease.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		unsubscribe()
		cand.Close()
		return nil, fmt.Errorf("mgrelection: %w", err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(rl.Namespace)})
	recorder := broadcaster.NewRecorder(c.Scheme(), corev1.EventSource{Component: "redislock-election"})
	lo := election.LockOptions{Wake: wake, Recorder: recorder, Object: rl}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	lo.Healthy, lo.StepDownAfter = o.healthy, o.stepDownAfter
	if o.fenced {
		key, id := client.ObjectKeyFromObject(rl), lc.Identity()
		lo.Admitted = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, t.RenewInterval)
			defer cancel()
			if err := redisconn.AwaitHolder(ctx, c, key, id, fencingMaxInterval, clock.RealClock{}); err != nil {
				return fmt.Errorf("mgrelection: %w", err)
			}
			return nil
		}
	}
	lock, err := election.NewLock(lc, name, t.TTL, lo)
	if err != nil {
		broadcaster.Shutdown()
		unsubscribe()
		cand.Close()
		return nil, err
	}
	return &Election{
		Lock:          lock,
		LeaseDuration: t.TTL, RenewDeadline: t.RenewDeadline, RetryPeriod: t.RenewInterval,
		close: func() {
			broadcaster.Shutdown()
			unsubscribe()
			cand.Close()
		},
	}, nil
}

// Option changes what ForRedisLock builds.
type Option func(*options)

// options are what the Options set.
type options struct {
	healthy       func(context.Context) error
	stepDownAfter time.Duration
	fenced        bool
}

// WithHealth gates leadership on check, called at each acquisition attempt
// and renewal (the RedisLock's renewInterval): a replica whose check fails
// does not lead, and a leader whose checks have failed for stepDownAfter
// (0: the RedisLock's ttl) releases the lock, so that a healthy replica
// takes over at once, and its manager stops leading within renewDeadline
// (see election.LockOptions.Healthy). Its write gate refuses writes from
// the release on.
func WithHealth(check func(context.Context) error, stepDownAfter time.Duration) Option {
	return func(o *options) { o.healthy, o.stepDownAfter = check, stepDownAfter }
}

// fencingMaxInterval caps WithFencing's backoff: 9 reads in the 2s of the
// default renewInterval.
const fencingMaxInterval = 500 * time.Millisecond

// WithFencing makes each acquisition wait, before the manager leads, until
// the RedisLock's status names this candidate as the holder: what the
// admission policy redislock-fencing admits writes by, so the leader's
// first write is admitted. It reads the RedisLock (get on redislocks) at
// once, then after 10ms, doubling to 500ms, for at most the RedisLock's
// renewInterval (redisconn.AwaitHolder); if the status does not show it
// by then (the controller down, say), the candidate releases the lock and
// client-go tries again later (election.LockOptions.Admitted).
func WithFencing() Option {
	return func(o *options) { o.fenced = true }
}

// Apply sets the manager options that replace Lease election with this
// Election: LeaderElection, LeaderElectionResourceLockInterface, the three
// durations, and LeaderElectionReleaseOnCancel, so a stopping leader hands
// over at once.
func (e *Election) Apply(o *manager.Options) {
	o.LeaderElection = true
	o.LeaderElectionResourceLockInterface = e.Lock
	o.LeaseDuration = &e.LeaseDuration
	o.RenewDeadline = &e.RenewDeadline
	o.RetryPeriod = &e.RetryPeriod
	o.LeaderElectionReleaseOnCancel = true
}

// Close unsubscribes and closes the Redis clients.
func (e *Election) Close() { e.close() }
