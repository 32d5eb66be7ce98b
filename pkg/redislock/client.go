package redislock

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// DefaultNodeTimeout is the default bound on one call to one node.
const DefaultNodeTimeout = 200 * time.Millisecond

// MaxNodeTimeout is the longest NodeTimeout New accepts. A node that takes
// longer to answer is as good as down for a lock; the cap also bounds what
// a server that never answers costs each caller: a shared controller's
// worker is held at most a few NodeTimeouts by any one lock.
const MaxNodeTimeout = 5 * time.Second

// Options configures a Client. The zero value (or a nil *Options) gives the
// documented defaults.
type Options struct {
	// Identity names this process in the values it stores, so observers can
	// tell who holds a lock. 1 to MaxIdentityLen bytes of UTF-8 without
	// control characters. Default: the POD_NAME environment variable, else
	// the hostname.
	Identity string

	// NodeTimeout bounds each call to each node: a node that has not
	// answered by then counts as failed for that call. It must be positive
	// and, for every lock, shorter than the lock's ttl (Redlock advises a
	// small fraction of it), and at most MaxNodeTimeout (5s). Default:
	// DefaultNodeTimeout (200ms).
	NodeTimeout time.Duration

	// Logger receives structured logs. Default: discard.
	Logger logr.Logger

	// Metrics receives measurements. Default: none.
	Metrics Metrics

	// Clock is the time source of the Client and of everything it
	// creates. Deadlines come from Now's monotonic reading, so wall-clock
	// jumps (NTP steps, a manual date change) never extend a lock's local
	// validity. Default: clock.RealClock. Tests inject
	// k8s.io/utils/clock/testing's FakeClock.
	Clock clock.WithDelayedExecution

	// AssumeDurable declares that the nodes never lose an acknowledged
	// write: every node persists each write before it answers
	// (appendonly yes, appendfsync always) and no failover promotes a
	// replica that lags. Default false: a node that has no fencing counter
	// for a lock (it never granted it, or it restarted or was flushed and
	// lost its data) grants that lock only once its data has been whole for
	// the lock's ttl, so a holder granted before the loss has stepped down
	// before anyone else is granted (S1). The price is at most one ttl of
	// waiting for the first grant of a new lock after a restart or a flush
	// (see the package documentation).
	AssumeDurable bool

	// WaitReplicas, when positive, makes every acquire, renew and fencing
	// write wait (Redis WAIT, within NodeTimeout) until that many of the
	// node's replicas acknowledged it; a node whose replicas do not counts
	// as failed for that call (an acquire gives the key back there). Use it
	// with Sentinel-managed nodes: a failover then promotes a replica that
	// has the lock, as Sentinel picks the most up-to-date replica it can
	// reach, so no holder's belief outlives the key. WaitAllReplicas waits
	// for the most replicas the node has had connected, however many
	// there are. In a Cluster the write and its WAIT go to the master
	// of the lock's slot, and so does a failover of that master: to its
	// replicas. Default 0: no wait. Not for Ring clients, whose pipelines
	// go by key.
	WaitReplicas int

	// KeyPrefix starts the name of every key and channel of a lock, so
	// that applications sharing one Redis keep apart: a lock called name
	// lives in KeyPrefix + "{" + name + "}" and keys derived from it (see
	// the README's Keys). It must not contain braces, which would break the
	// Cluster hash tag around the name. Clients that share locks must use
	// the same prefix; the RedisLock controller reads the default one.
	// Default: DefaultKeyPrefix ("redislock:").
	KeyPrefix string
}

// Client acquires locks on one Redis node, or with the Redlock algorithm on
// an odd number N of independent nodes, where a lock is held once a
// majority (N/2+1) of nodes grant it. N=1 is the single-instance lock; the
// same code serves every N.
//
// A Client is safe for concurrent use. It does not own the node clients:
// closing them is the caller's job, after the Client is no longer used.
type Client struct {
	nodes   []*node
	all     []int // the index of every node
	quorum  int
	opts    Options
	replies sync.Pool // of *replyBuf
	durable string    // acquire.lua's ARGV[3]: "1" with AssumeDurable
	// announce is acquire.lua's ARGV[6]: "1" for the script to publish a
	// grant (one node, no WaitReplicas), "0" with WaitReplicas or Redlock,
	// where acquire publishes it once the replicas acknowledged it or a
	// majority granted it (see announceGrant).
	announce string
	// epoch gives the restart guard's epoch marker for a lock name.
	epoch func(name string) string
	// fenceLife is the lifetime of an idle fencing counter for a lock of
	// a ttl: fenceLifetime, which tests shorten.
	fenceLife func(ttl time.Duration) time.Duration
	// releases multiplexes WatchReleases, one per node.
	releases []*releaseWatches
}

// fenceLifetime is how long a lock's fencing counter outlives the lock's
// last grant or renewal: max(24h, 100 × ttl). Far longer than any ttl, so
// that a counter that expired and starts again at the server's clock (times
// 1000) starts above every token handed out before it (S3), and short
// enough that locks named per entity (an order, a user) leave no key
// behind for long.
func fenceLifetime(ttl time.Duration) time.Duration { return max(24*time.Hour, 100*ttl) }

// New returns a Client over nodes, each an independent Redis deployment
// (a standalone server, a Sentinel-managed master or a Cluster). It checks
// the options and returns an error wrapping ErrInvalidOptions that names the
// broken rule: there must be an odd number of nodes, none nil; NodeTimeout
// must not be negative nor over MaxNodeTimeout; Identity must follow the rules above; KeyPrefix
// must not contain a brace. New does no I/O.
func New(nodes []redis.UniversalClient, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch n := len(nodes); {
	case n == 0:
		return nil, fmt.Errorf("%w: no nodes: need 1 (single instance) or an odd number for Redlock", ErrInvalidOptions)
	case n%2 == 0:
		return nil, fmt.Errorf("%w: %d nodes: Redlock needs an odd number, so that two majorities always overlap", ErrInvalidOptions, n)
	}
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	if err := checkIdentity(o.Identity); err != nil {
		return nil, fmt.Errorf("%w: Identity: %w", ErrInvalidOptions, err)
	}
	switch {
	case o.NodeTimeout < 0:
		return nil, fmt.Errorf("%w: NodeTimeout %v is negative", ErrInvalidOptions, o.NodeTimeout)
	case o.NodeTimeout > MaxNodeTimeout:
		return nil, fmt.Errorf("%w: NodeTimeout %v is over the %v maximum", ErrInvalidOptions, o.NodeTimeout, MaxNodeTimeout)
	case o.NodeTimeout == 0:
		o.NodeTimeout = DefaultNodeTimeout
	}
	switch {
	case o.KeyPrefix == "":
		o.KeyPrefix = DefaultKeyPrefix
	case strings.ContainsAny(o.KeyPrefix, "{}"):
		return nil, fmt.Errorf("%w: KeyPrefix %q contains a brace, which would break the Cluster hash tag around lock names", ErrInvalidOptions, o.KeyPrefix)
	}
	if o.WaitReplicas < WaitAllReplicas {
		return nil, fmt.Errorf("%w: WaitReplicas %d is negative, and not WaitAllReplicas (%d)", ErrInvalidOptions, o.WaitReplicas, WaitAllReplicas)
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Client{quorum: len(nodes)/2 + 1, opts: o, durable: "0", announce: "1", fenceLife: fenceLifetime}
	if o.AssumeDurable {
		c.durable = "1"
	}
	if o.WaitReplicas != 0 || len(nodes) > 1 {
		// A grant counts only once replicas, or a majority of nodes,
		// acknowledged it: announced then (see announceGrant).
		c.announce = "0"
	}
	c.replies.New = func() any { return &replyBuf{r: make([]reply, len(nodes))} }
	for i, rc := range nodes {
		if rc == nil {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalidOptions, i)
		}
		if o.WaitReplicas == WaitAllReplicas && isFailoverClient(rc) {
			return nil, fmt.Errorf("%w: node %d: WaitAllReplicas on a Sentinel-managed master needs NewSentinelNode, whose Sentinels say which replicas may be promoted, not redis.NewFailoverClient", ErrInvalidOptions, i)
		}
		n := newNode(nodeName(i, rc), rc, o.WaitReplicas, o.NodeTimeout, o.Clock)
		if o.WaitReplicas != 0 && n.sticky == nil && n.cluster == nil {
			return nil, fmt.Errorf("%w: node %d: WaitReplicas needs a client of one server (redis.NewClient, redis.NewFailoverClient) or a Cluster's, not a %T, whose pipelines go by key", ErrInvalidOptions, i, rc)
		}
		c.nodes = append(c.nodes, n)
		c.all = append(c.all, i)
	}
	c.epoch = nodeKeys(o.KeyPrefix, epochSuffix, nodes)
	for _, n := range c.nodes {
		c.releases = append(c.releases, newReleaseWatches(c, n))
	}
	return c, nil
}

// Identity returns the identity this Client stores in its locks.
func (c *Client) Identity() string { return c.opts.Identity }

func nodeName(i int, rc redis.UniversalClient) string {
	if o, ok := rc.(interface{ Options() *redis.Options }); ok {
		return fmt.Sprintf("node %d (%s)", i, o.Options().Addr)
	}
	return fmt.Sprintf("node %d", i)
}

func defaultIdentity() string {
	if id := os.Getenv("POD_NAME"); id != "" {
		return id
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "unknown"
}
