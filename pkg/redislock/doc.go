// Package redislock grants locks and leadership with Redis: on one node, or
// with the Redlock algorithm on an odd number N of independent nodes, where
// a lock is held once a majority (N/2+1) grant it. One code path serves
// every N.
//
// # How a lock works
//
// Obtain sends SET key value NX PX ttl (inside a script that also counts
// fencing tokens) to every node at once, each call bounded by
// Options.NodeTimeout. The value carries a fresh 128-bit random token and
// the holder's identity ("v1:<token>:<identity>"). Refresh extends the ttl by a
// compare-and-pexpire script and Release deletes the key by a
// compare-and-delete script: neither ever touches a key that holds another
// token. Refresh never re-creates a key to keep a lock it has lost; once a
// majority confirmed the renewal it puts the holder's key back on nodes
// where it went missing (holder repair), which can only refuse others. Watchdog renews
// a held lock in the background, and Elector campaigns for leadership,
// sleeping until the holder's key would expire and waking at once when it
// is released (pub/sub). ObtainWait waits for one lock the same way, until
// it is granted or its context ends.
//
// # What is guaranteed
//
//   - One holder (S1): a holder whose acquire or renew was sent at local
//     monotonic time t0 and succeeded believes it holds the lock (Lock.Valid,
//     Elector.State().Leading) until at most t0 + ttl - drift, where drift is 1% of
//     the ttl plus 2ms, and no longer, even when Redis is unreachable or a
//     call is stuck. Watchdog and Elector step down earlier, at
//     RenewDeadline. Deadlines use the monotonic clock, so wall-clock jumps
//     do not move them, and a process that wakes from a pause past its
//     deadline sees Valid() == false before it can act.
//   - Own release (S2): renewal and release change a key only while it holds
//     the caller's token.
//   - Fencing (S3): each acquisition of a name gets a token (Lock.Fence)
//     greater than every earlier holder's. In Redlock mode the holder makes
//     a majority of nodes know its token before it may use it, and any later
//     majority overlaps that one.
//   - Liveness (L1): a crashed holder's lock frees itself after the ttl; a
//     released one wakes waiting Electors within a round trip.
//
// # Sharded locks
//
// NewSharded splits one name into N shards shared out among the live
// candidates (Sharded): each shard is a lock with the guarantees above,
// one holder, own release and its own fencing tokens, and a candidate
// renews its membership and every shard it holds in one call per
// RenewInterval. It runs on one node, not Redlock's.
//
// # What is not
//
// A lock gives mutual exclusion of beliefs, not of effects: a holder that
// checked Valid and then paused (GC, SIGSTOP, a slow disk) can still act
// after its lock has passed to another. Systems that must never accept a
// stale holder's write should check the fencing token.
//
// A node that restarts without persistence, or whose data is flushed
// (FLUSHALL, FLUSHDB, SWAPDB), forgets the lock and its fencing counter
// while the holder may still believe it holds the lock; a node that
// restarts from a snapshot older than its last writes (Redis's default
// save points, or appendfsync everysec) keeps an older counter but may
// lose the newest grant or renewal of its lock. The restart guard covers
// both: a node grants a lock only once its data has been whole for one
// ttl; the old holder's renewal finds the key gone and it steps down, and
// its belief ends within a ttl of its last renewal, so S1 holds. A counter
// older than the data's epoch (it was restored from disk) starts again
// from the clock, as a lost one does, so no token handed out after the
// snapshot is handed out again (S3). Each node keeps an epoch marker (see
// epoch.go) that goes with its data, and a restart that restores data from
// disk is told by LASTSAVE, which Redis resets at start-up; the guard
// reads the uptime only then (and on each new name within the second of a
// save, as LASTSAVE counts whole seconds), so a grant on a node known whole
// sends no INFO: it costs one LASTSAVE inside the acquire script. The price
// is up to one ttl (plus a second: Redis reports its uptime in whole
// seconds) before the first grant of any lock after a restart or a flush
// (the guard reads a flush, and a CONFIG RESETSTAT that would hide one,
// from INFO commandstats); a holder whose key the restart kept renews on.
// Not caught: a SWAPDB with a database whose locks use the same key prefix,
// as its marker comes along. The guard needs LASTSAVE and INFO: an ACL that
// denies them makes every grant fail with the reason, never skip the
// guard. Options.AssumeDurable turns the guard off for nodes that never
// lose an acknowledged write (appendonly yes, appendfsync always).
//
// # What a fencing counter means
//
// Each node keeps one counter per lock name (redislock:{name}:fence). It
// expires once the lock has gone max(24h, 100 × ttl) without a grant, a
// renewal or a raise, so that locks named per entity (an order, a user)
// leave no key behind once released (a holder that crashed leaves its small
// validity key, which must not expire: see keys.go). It
// counts grants, not attempts: an acquisition adds one on
// each node that granted it, and an attempt that fails to win a majority
// takes its count back when it gives its keys back, so a counter does not
// grow while a holder stays, however many standbys try. The holder's token
// is the largest count among the nodes it won, made known to a majority
// (and to nodes holder repair restores) before it is used. A counter may
// still run ahead of the last token by the attempts whose keys expired
// before their give-back reached the node; it never runs behind (S3).
// Observers read the holder's token from the nodes holding its key
// (Inspect, the RedisLock status).
//
// # Cost (E1)
//
// A leader sends one renewal per node per RenewInterval; a standby Elector
// one attempt per node per ttl while the holder renews, and an extra one
// when a holder releases. A failed attempt's give-back publishes nothing, so
// it wakes no one, and after a split vote (no candidate won a majority) the
// candidates back off at random within a RenewInterval rather than meet
// again at once.
//
// Fencing counters start at the server's clock in whole milliseconds since
// the epoch, times 1000 (then +1 per grant), so a counter lost with the
// node's data, evicted, or expired after its idle lifetime, starts again
// above every token handed out before, as long as the server's clock does
// not step back (by more than the lifetime, for an expired one) and fewer
// than 1000 grants of the lock come per millisecond (S3 across a restart,
// an eviction and an expiry).
//
// A Sentinel failover to an asynchronous replica that had not yet received
// the key loses it too. Options.WaitReplicas makes every acquire and renew
// wait until that many replicas acknowledged it. Sentinel picks the replica
// to promote by the replication offsets it last read (up to 10s old), so
// only a wait for every replica it may promote makes sure the promoted one
// has the lock: WaitAllReplicas, which asks the topology which replicas
// those are (the Sentinels of a SentinelNode, a Cluster master itself) and
// checks each one's acknowledged offset (see WaitAllReplicas). It rests on
// these assumptions:
//   - a replica that Sentinel has down (s_down, o_down), or that the
//     Cluster flags failed, is not promoted before it has resynced; one
//     that comes back, is seen up and is promoted before it reattaches and
//     before the Client asks the Sentinels again (topologyMaxAge) could
//     lack a grant, and so could one that attached and detached between
//     two of a Client's writes unseen by the Client and the Sentinels;
//   - in a Cluster, a node that may take the master's place is one the
//     master's CLUSTER NODES, read after the WAIT, links to it (see
//     clusterReplicas): one that starts to follow it later syncs from it
//     before it may be promoted, unless the master fails within that
//     sync's first moments;
//   - expiries replicate as absolute times of the master's clock (Redis
//     7 propagates PEXPIRE as PEXPIREAT), so S1 across a failover needs
//     each replica's clock within the drift allowance of its master's;
//   - a replica that acknowledged a write keeps it until it is promoted:
//     not covered is one that restarted without persistence meanwhile;
//   - all candidates of a lock use the same ttl, AssumeDurable and
//     KeyPrefix: the guard holds a name back for the asking candidate's
//     ttl, and keys under another prefix are another lock.
//
// A replica without persistence keeps the RDB of its last full sync
// (rdb-del-sync-files no, Redis's default) and loads it when it restarts:
// an older state, which the guard treats as a restart from a snapshot if
// that replica is promoted within a ttl; set rdb-del-sync-files yes all the
// same. Prefer Redlock over independent nodes to replicated failover for
// locks that matter.
//
// Redlock's safety also rests on the nodes' clocks not running faster than
// the drift allowance over one ttl; processes' clocks may differ
// arbitrarily, as only durations measured locally are used. S3 across a
// node's data loss also rests on the nodes' clocks agreeing: a counter a
// node starts anew begins at its own clock, so a token counted on a node
// whose clock runs ahead can be undercut by a later holder whose majority
// holds no node that knew that token (the node that knew it restarted
// empty while the fast one was unreachable). Keep the nodes' clocks
// synchronised (NTP), as their expiries already need.
//
// Holder repair (a renewing holder puts its key back on a node where it
// vanished) never moves a node's validity back, however late it arrives
// (S1). A repair that arrives after the holder released the lock puts the
// holder's key back for one ttl: it refuses others for that long (L1, as
// after a crash), while nobody believes it holds the lock.
//
// # Why New takes go-redis clients, not a narrow interface
//
// bsm/redislock takes a redis.Scripter, which a test double can implement.
// This package needs more of a node than running scripts: Subscribe, whose
// *redis.PubSub only a real connection produces, to wake waiters on a
// release; the autopipeliner, so that concurrent calls share round trips;
// a pipeline of the script and WAIT on one connection for
// Options.WaitReplicas; INFO for CheckIndependent and CheckEviction; and
// the client's options, to name the node and to know whether it honours
// context deadlines. An interface narrow enough to fake by hand would lose
// release wake-ups or WAIT, so New takes redis.UniversalClient. For unit
// tests of code that uses locks, package redislockfake gives a real
// Client over in-memory nodes, with a clock the test moves.
package redislock
