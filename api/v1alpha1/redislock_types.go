package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisMode says how the Redis deployment holding a lock is reached.
// +kubebuilder:validation:Enum=Standalone;Redlock;Sentinel;Cluster
type RedisMode string

// The Redis modes.
const (
	// ModeStandalone is one Redis server at addrs[0].
	ModeStandalone RedisMode = "Standalone"
	// ModeRedlock is an odd number of independent Redis servers, one per
	// address; a lock is held once a majority grant it.
	ModeRedlock RedisMode = "Redlock"
	// ModeSentinel is the master named masterName, found through the
	// Sentinels at addrs.
	ModeSentinel RedisMode = "Sentinel"
	// ModeCluster is a Redis Cluster reached through the seed nodes at addrs.
	ModeCluster RedisMode = "Cluster"
)

// DeletionPolicy says what deleting a RedisLock does to its Redis key.
// +kubebuilder:validation:Enum=Retain;Release
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionRetain leaves the key and its holder alone: candidates that
	// hold or campaign for the lock go on as before.
	DeletionRetain DeletionPolicy = "Retain"
	// DeletionRelease deletes the current holder's key before the object
	// goes, so the holder loses the lock at its next renewal.
	DeletionRelease DeletionPolicy = "Release"
)

// SecretKeyRef names one key of a Secret in the RedisLock's namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SecretRef names a whole Secret in the RedisLock's namespace.
type SecretRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RedisTLS turns on TLS to Redis (and, in Sentinel mode, to the Sentinels).
// +kubebuilder:validation:XValidation:rule="!self.?insecureSkipVerify.orValue(false) || (!has(self.caSecretRef) && !has(self.serverName))",message="insecureSkipVerify turns off the checks that caSecretRef and serverName configure: set either insecureSkipVerify or those, not both",fieldPath=".insecureSkipVerify"
type RedisTLS struct {
	// caSecretRef names the PEM CA bundle that signs the servers'
	// certificates. Unset: the system roots. A Secret that cert-manager
	// issues holds it under the key ca.crt.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
	// serverName overrides the name checked in the servers' certificates.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
	// certSecretRef names a Secret of type kubernetes.io/tls, as
	// cert-manager issues, whose keys tls.crt and tls.key (PEM) are the
	// client certificate and its private key, presented to servers that
	// require client certificates (mutual TLS: redis-server's
	// tls-auth-clients). tls.crt may hold the chain after the
	// certificate. Unset: no client certificate.
	// +optional
	CertSecretRef *SecretRef `json:"certSecretRef,omitempty"`
	// insecureSkipVerify, when true, accepts any certificate the servers
	// present, for any name: the connection is encrypted but not
	// authenticated, so anyone who can intercept it can pose as Redis,
	// read the password and grant or withhold locks. For test set-ups
	// only; give the CA with caSecretRef instead. Excludes caSecretRef
	// and serverName. Default: false.
	// +optional
	InsecureSkipVerify *bool `json:"insecureSkipVerify,omitempty"`
}

// RedisConnectionSpec says how to reach Redis. Field names follow go-redis's
// UniversalOptions where they mean the same thing.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Standalone' || size(self.addrs) == 1",message="Standalone mode takes exactly one address in addrs",fieldPath=".addrs"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Redlock' || size(self.addrs) % 2 == 1",message="Redlock mode needs an odd number of addrs, so that two majorities always overlap",fieldPath=".addrs"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' ? has(self.masterName) : !has(self.masterName)",message="masterName is required in Sentinel mode and allowed only there",fieldPath=".masterName"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Cluster' || !has(self.db) || self.db == 0",message="Cluster mode has only db 0",fieldPath=".db"
// +kubebuilder:validation:XValidation:rule="self.mode in ['Sentinel', 'Cluster'] || !has(self.waitReplicas)",message="waitReplicas is allowed only in Sentinel and Cluster modes",fieldPath=".waitReplicas"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' || !has(self.sentinelUsernameSecretRef)",message="sentinelUsernameSecretRef is allowed only in Sentinel mode",fieldPath=".sentinelUsernameSecretRef"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' || !has(self.sentinelPasswordSecretRef)",message="sentinelPasswordSecretRef is allowed only in Sentinel mode",fieldPath=".sentinelPasswordSecretRef"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Sentinel' || !has(self.sentinelUsernameSecretRef) || has(self.sentinelPasswordSecretRef)",message="sentinelUsernameSecretRef needs sentinelPasswordSecretRef: a Sentinel authenticates a user by its password",fieldPath=".sentinelUsernameSecretRef"
type RedisConnectionSpec struct {
	// mode is Standalone (one server), Redlock (an odd number of
	// independent servers), Sentinel (a master found through Sentinels) or
	// Cluster.
	// Immutable.
	// +optional
	// +kubebuilder:default=Standalone
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode cannot be changed on a live lock: it decides which servers hold the lock, and candidates already running would go on using the old value, so two could lead at once; create a new RedisLock (or connection) instead"
	Mode RedisMode `json:"mode,omitempty"`
	// addrs are host:port addresses, without a scheme ("[::1]:6379" for
	// IPv6): the server (Standalone), each independent server (Redlock),
	// the Sentinels (Sentinel) or seed nodes (Cluster). Ports run from 1
	// to 65535. Host names are compared without regard to case, so
	// "redis-a:6379" and "REDIS-A:6379" are one server, to list once.
	// Immutable, though their order may change.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=15
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^([A-Za-z0-9._-]+|[[][0-9A-Fa-f:.]+[]]):[0-9]{1,5}$') && int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535",message="each address must be host:port, with a port from 1 to 65535: a DNS name or IPv4 address (redis.redis.svc:6379, 10.0.0.7:6379), or an IPv6 address in brackets ([fd00::7]:6379); no scheme, user or path"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.all(b, a == b || a.lowerAscii() != b.lowerAscii()))",messageExpression="'addrs ' + self.filter(x, self.exists(y, x != y && x.lowerAscii() == y.lowerAscii()))[0] + ' and ' + self.filter(b, b != self.filter(x, self.exists(y, x != y && x.lowerAscii() == y.lowerAscii()))[0] && b.lowerAscii() == self.filter(x, self.exists(y, x != y && x.lowerAscii() == y.lowerAscii()))[0].lowerAscii())[0] + ' name the same server: host names are compared without regard to case, so list each server once'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="addrs cannot be changed on a live lock: they are the servers that hold the lock, and candidates already running would go on using the old value, so two could lead at once; create a new RedisLock (or connection) instead"
	Addrs []string `json:"addrs"`
	// masterName is the Sentinel master's name; Sentinel mode only.
	// Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="masterName cannot be changed on a live lock: it names the master that holds the lock, and candidates already running would go on using the old value, so two could lead at once; create a new RedisLock (or connection) instead"
	MasterName string `json:"masterName,omitempty"`
	// db is the database number; 0 in Cluster mode. Immutable.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="db cannot be changed on a live lock: it decides where the lock's key is, and candidates already running would go on using the old value, so two could lead at once; create a new RedisLock (or connection) instead"
	DB *int32 `json:"db,omitempty"`
	// usernameSecretRef names the ACL username. Unset: the default user.
	// +optional
	UsernameSecretRef *SecretKeyRef `json:"usernameSecretRef,omitempty"`
	// passwordSecretRef names the password. Unset: no AUTH.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
	// sentinelUsernameSecretRef names the ACL username the Sentinels
	// take; Sentinel mode only, with sentinelPasswordSecretRef. Unset:
	// the default user.
	// +optional
	SentinelUsernameSecretRef *SecretKeyRef `json:"sentinelUsernameSecretRef,omitempty"`
	// sentinelPasswordSecretRef names the password the Sentinels take
	// (their requirepass), which can differ from the master's
	// passwordSecretRef; Sentinel mode only. Bitnami's Redis chart turns
	// Sentinel auth on by default (auth.sentinel), with the master's
	// password: name the same Secret key as passwordSecretRef. Unset: no
	// AUTH to the Sentinels.
	// +optional
	SentinelPasswordSecretRef *SecretKeyRef `json:"sentinelPasswordSecretRef,omitempty"`
	// tls, when set, connects with TLS.
	// +optional
	TLS *RedisTLS `json:"tls,omitempty"`
	// nodeTimeout bounds each call to each node; it must be shorter than
	// ttl. Redlock advises a small fraction of the ttl. A duration as Go
	// writes it (200ms, 0.5s), from 1ms to 5s: a node slower than that is
	// as good as down, and a server that never answers holds a shared
	// controller's worker no longer than a few nodeTimeouts.
	// +optional
	// +kubebuilder:default="200ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isNodeTimeout(self)",message="nodeTimeout must be a duration from 1ms to 5s, written as in 200ms, 0.5s or 2s: numbers, each followed by a unit (ns, us, ms or s), without spaces"
	NodeTimeout *Duration `json:"nodeTimeout,omitempty"`
	// waitReplicas is how many of the master's replicas must acknowledge
	// each acquisition and renewal (Redis WAIT, within nodeTimeout) before
	// it counts; Sentinel and Cluster modes only (in a Cluster, the
	// replicas of the master of the lock's slot). Unset: every replica
	// that may be promoted, as the Sentinels (SENTINEL REPLICAS) or the
	// Cluster (CLUSTER NODES) say, and any other attached to the
	// master; a backup or sync tool (no listening port) never counts. A
	// failover then promotes a replica that has the lock, so no holder
	// believes in a key the new master lacks. A number below the replicas
	// lets Sentinel promote one that lacks a fresh grant (it judges by
	// offsets up to 10s old); 0 trades all of that for availability when no
	// replica answers.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	WaitReplicas *int32 `json:"waitReplicas,omitempty"`
	// evictingNodes says what a node that can evict lock keys means (a
	// maxmemory with a policy other than noeviction): Warn shows it in the
	// EvictionSafe condition, an event and a metric, and the lock is used;
	// Refuse also makes candidates refuse to campaign on such nodes (the
	// agent's /leader and the plugin's error say why) and the lock
	// Ready=False, until the policy is noeviction.
	// +optional
	// +kubebuilder:default=Warn
	EvictingNodes EvictingNodes `json:"evictingNodes,omitempty"`
}

// EvictingNodes is what a Redis node that can evict lock keys means.
// +kubebuilder:validation:Enum=Warn;Refuse
type EvictingNodes string

// The EvictingNodes values.
const (
	EvictingNodesWarn   EvictingNodes = "Warn"
	EvictingNodesRefuse EvictingNodes = "Refuse"
)

// Scope says which candidates contend for a lock.
// +kubebuilder:validation:Enum=Cluster;Global
type Scope string

// The Scope values.
const (
	ScopeCluster Scope = "Cluster"
	ScopeGlobal  Scope = "Global"
)

// RedisLockSpec declares one named lock.
//
// Each duration field's rule matches the string against a pattern before
// it calls duration(): the pattern is what Go's time.ParseDuration reads
// (without a sign), with each number's integer part short enough for its
// unit (at most 9999h, 999999m, ... 17 digits of ns) that no string of the
// fields' 64 characters can overflow, while every value up to 8760h fits.
// So the API server stores only what the controller, the plugin and the
// agent can decode, and no rule fails to evaluate.
//
// The timing rules below compare effective values: an unset renewInterval
// or renewDeadline is derived from ttl as the lock engine derives it (2/15
// and 2/3 of it: redislock.Timing), and renewDeadline must leave the
// engine's allowance for clock drift (1% of ttl + 2ms), so that the API
// server accepts a timing exactly when the engine does. Each first checks
// the durations it reads as their fields' rules do, so that a bad duration
// gets one message, its field's.
// +kubebuilder:validation:XValidation:rule="![self.ttl, self.?renewInterval.orValue('1s'), self.?renewDeadline.orValue('1s')].all(d, isDurationInRange(d)) || renewIntervalOf(self) < renewDeadlineOf(self)",messageExpression="'renewInterval ' + (has(self.renewInterval) ? self.renewInterval : '(unset: 2/15 of ttl ' + self.ttl + ')') + ' must be shorter than renewDeadline ' + (has(self.renewDeadline) ? self.renewDeadline : '(unset: 2/3 of ttl ' + self.ttl + ')')",fieldPath=".renewInterval"
// +kubebuilder:validation:XValidation:rule="![self.ttl, self.?renewDeadline.orValue('1s')].all(d, isDurationInRange(d)) || renewDeadlineOf(self) < ttlLessDriftOf(self)",messageExpression="'renewDeadline ' + (has(self.renewDeadline) ? self.renewDeadline : '(unset: 2/3 of ttl ' + self.ttl + ')') + ' must be shorter than ttl ' + self.ttl + ' less the allowance for clock drift, 1% of ttl + 2ms'",fieldPath=".renewDeadline"
// +kubebuilder:validation:XValidation:rule="!has(self.redis) || ![self.ttl, self.redis.nodeTimeout].all(d, isDurationInRange(d)) || duration(self.redis.nodeTimeout) < duration(self.ttl)",messageExpression="'redis.nodeTimeout ' + self.redis.nodeTimeout + ' must be shorter than ttl ' + self.ttl",fieldPath=".redis.nodeTimeout"
// +kubebuilder:validation:XValidation:rule="has(self.lockName) == has(oldSelf.lockName) && (!has(self.lockName) || self.lockName == oldSelf.lockName)",messageExpression="'lockName cannot be changed, set or unset on a live lock (from ' + (has(oldSelf.lockName) ? '\"' + oldSelf.lockName + '\"' : 'unset') + ' to ' + (has(self.lockName) ? '\"' + self.lockName + '\"' : 'unset') + '): it names the key in Redis, and candidates already running would go on using the old value, so two could lead at once; create a new RedisLock instead'",fieldPath=".lockName"
// +kubebuilder:validation:XValidation:rule="has(self.redis) != has(self.connectionRef)",message="set exactly one of redis (the connection inline) and connectionRef (a RedisConnection or ClusterRedisConnection)"
// +kubebuilder:validation:XValidation:rule="has(self.connectionRef) == has(oldSelf.connectionRef) && (!has(self.connectionRef) || self.connectionRef == oldSelf.connectionRef)",message="connectionRef cannot be changed, set or unset on a live lock: it decides which servers hold the lock, and candidates already running would go on using the old ones, so two could lead at once; create a new RedisLock instead",fieldPath=".connectionRef"
// +kubebuilder:validation:XValidation:rule="self.scope != 'Global' || has(self.lockName)",message="scope Global needs lockName: the name under which the candidates of every cluster meet",fieldPath=".lockName"
// +kubebuilder:validation:XValidation:rule="self.scope == oldSelf.scope",messageExpression="'scope cannot be changed on a live lock (from ' + oldSelf.scope + ' to ' + self.scope + '): it names the key in Redis, and candidates already running would go on using the old one, so two could lead at once; create a new RedisLock instead'",fieldPath=".scope"
// +kubebuilder:validation:XValidation:rule="has(self.shards) == has(oldSelf.shards) && (!has(self.shards) || self.shards == oldSelf.shards)",message="shards cannot be changed, set or unset on a live lock: candidates already running would go on sharing out the old count; create a new RedisLock instead",fieldPath=".shards"
// +kubebuilder:validation:XValidation:rule="!has(self.shards) || !has(self.redis) || self.redis.mode != 'Redlock'",message="shards needs one node: a sharded lock does not run in Redlock mode",fieldPath=".shards"
// +kubebuilder:validation:XValidation:rule="!has(self.shards) || self.deletionPolicy != 'Release'",message="deletionPolicy Release releases one holder's key; a sharded lock has one per shard: use Retain",fieldPath=".deletionPolicy"
type RedisLockSpec struct {
	// redis says how to reach the Redis deployment that holds the lock,
	// inline; its Secrets are in the RedisLock's namespace. Set exactly
	// one of redis and connectionRef.
	// +optional
	Redis *RedisConnectionSpec `json:"redis,omitempty"`
	// connectionRef names a shared connection instead: a RedisConnection
	// in this namespace or a ClusterRedisConnection. Immutable: it can be
	// neither changed nor set or unset once the object exists.
	// +optional
	ConnectionRef *ConnectionRef `json:"connectionRef,omitempty"`
	// scope says which candidates contend for the lock. Cluster: those of
	// this cluster only; the lock in Redis is
	// "<cluster>/<namespace>/<lockName>", <cluster> being the UID of this
	// cluster's kube-system namespace (status.clusterID), so that clusters
	// which share a Redis never share a lock by accident. Global: the
	// candidates of every cluster whose RedisLock has scope Global and the
	// same lockName on the same Redis, wherever its namespace; the lock in
	// Redis is "global/<lockName>", and lockName is required. Immutable.
	// +optional
	// +kubebuilder:default=Cluster
	Scope Scope `json:"scope,omitempty"`
	// lockName names the lock within this namespace (scope Cluster) or
	// across clusters (scope Global): see scope for the lock's name in
	// Redis. Default: the object's name; required with scope Global.
	// Immutable: it can be neither changed nor set or unset once the
	// object exists, even to the object's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^{}\s]+$`
	LockName string `json:"lockName,omitempty"`
	// ttl is how long the lock lives after each acquire or renew, as
	// client-go's LeaseDuration: a crashed holder is replaced after at
	// most this long. A duration as Go writes it (15s, 1m30s, 1.5h), in
	// whole milliseconds, from 1ms to 8760h.
	// +optional
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isDurationInRange(self) && int(duration(self)) % 1000000 == 0",message="ttl must be a duration in whole milliseconds from 1ms to 8760h, written as in 15s, 1m30s, 500ms or 1.5h: numbers, each followed by a unit (ns, us, ms, s, m or h), without spaces; for days, use hours (24h)"
	TTL *Duration `json:"ttl,omitempty"`
	// renewInterval is how often the holder renews, as client-go's
	// RetryPeriod; shorter than renewDeadline. Unset: 2/15 of ttl (2s of
	// the default 15s). A duration from 1ms to 8760h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isDurationInRange(self)",message="renewInterval must be a duration from 1ms to 8760h, written as in 15s, 1m30s, 500ms or 1.5h: numbers, each followed by a unit (ns, us, ms, s, m or h), without spaces; for days, use hours (24h)"
	RenewInterval *Duration `json:"renewInterval,omitempty"`
	// renewDeadline is how long the holder keeps trying to renew before it
	// steps down, as client-go's RenewDeadline; shorter than ttl less 1% of
	// ttl and 2ms (the allowance for clock drift). Unset: 2/3 of ttl (10s
	// of the default 15s). A duration from 1ms to 8760h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isDurationInRange(self)",message="renewDeadline must be a duration from 1ms to 8760h, written as in 15s, 1m30s, 500ms or 1.5h: numbers, each followed by a unit (ns, us, ms, s, m or h), without spaces; for days, use hours (24h)"
	RenewDeadline *Duration `json:"renewDeadline,omitempty"`
	// shards splits the lock into this many shards, from 1 to 256, shared
	// out among the live candidates, each shard a lock of its own with one
	// holder and its own fencing tokens (docs/sharding.md). Unset: one
	// holder for the whole lock. A sharded lock runs on one node (not in
	// Redlock mode) and is not released on deletion. It cannot be
	// changed, set or unset on a live lock.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	Shards *int32 `json:"shards,omitempty"`
	// deletionPolicy says what deleting this object does to the lock in
	// Redis: Retain leaves it and its holder alone; Release deletes the
	// current holder's key first, so the holder loses the lock at its next
	// renewal.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// EffectiveTiming is a lock's timing with the defaults applied, as the
// lock engine uses it (redislock.Timing).
type EffectiveTiming struct {
	// ttl is spec.ttl.
	TTL metav1.Duration `json:"ttl"`
	// renewInterval is spec.renewInterval, or 2/15 of ttl when unset.
	RenewInterval metav1.Duration `json:"renewInterval"`
	// renewDeadline is spec.renewDeadline, or 2/3 of ttl when unset.
	RenewDeadline metav1.Duration `json:"renewDeadline"`
}

// ShardHolderStatus is one candidate identity holding shards of a
// sharded lock.
type ShardHolderStatus struct {
	// identity names the candidate (its pod, for the plugin and the
	// agent); candidates of one identity are counted together.
	Identity string `json:"identity"`
	// shards is how many shards it holds.
	Shards int32 `json:"shards"`
}

// NodeStatus is one Redis node as the controller last saw it.
type NodeStatus struct {
	// address is the node's host:port.
	Address string `json:"address"`
	// reachable says the node answered the last inspection.
	Reachable bool `json:"reachable"`
	// message says why the node did not answer.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClassLabel assigns a RedisLock to the controllers started with the same
// -lock-class (and their webhooks), so that several installations can share
// a cluster, each with its own RedisLocks; a RedisLock without it belongs to
// the controllers without a class.
const ClassLabel = "redislock.io/class"

// Condition types of a RedisLock.
const (
	// ConditionReady is True when the spec is usable and Redis answers.
	ConditionReady = "Ready"
	// ConditionHeld is True while a candidate holds the lock.
	ConditionHeld = "Held"
	// ConditionRedisReachable is True when a majority of nodes answer.
	ConditionRedisReachable = "RedisReachable"
	// ConditionShardsUnowned is True, for a sharded lock, while some of
	// its shards have no holder; its lastTransitionTime says since when.
	ConditionShardsUnowned = "ShardsUnowned"
)

// RedisLockStatus is the live state of the lock, as read from Redis. It
// never shows the holder's token.
type RedisLockStatus struct {
	// clusterID is this cluster's identity, the UID of its kube-system
	// namespace, with scope Cluster: part of the lock's name in Redis.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// connection is the shared connection the lock uses,
	// "RedisConnection/<name>" or "ClusterRedisConnection/<name>"; empty
	// with spec.redis inline.
	// +optional
	Connection string `json:"connection,omitempty"`
	// lockName is the lock's name in Redis; its key is
	// "redislock:{<lockName>}".
	// +optional
	LockName string `json:"lockName,omitempty"`
	// holderIdentity names the current holder; empty when the lock is free.
	// +optional
	HolderIdentity string `json:"holderIdentity,omitempty"`
	// acquireTime is when the controller first saw the current holder.
	// +optional
	AcquireTime *metav1.Time `json:"acquireTime,omitempty"`
	// leaderTransitions counts the changes of holder the controller saw.
	// +optional
	LeaderTransitions int32 `json:"leaderTransitions"`
	// fencingToken is the latest fencing token handed out for the lock:
	// the current holder's while one holds it on a single node. On
	// Redlock it is the highest counter of the nodes that answered: it may
	// rise during a term (read while an acquisition was still raising the
	// nodes' counters to its token), and read lower while a node that
	// holds a higher counter does not answer.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`
	// shardsHeld is, for a sharded lock, how many of its shards have a
	// holder.
	// +optional
	ShardsHeld *int32 `json:"shardsHeld,omitempty"`
	// shardHolders lists, for a sharded lock, each candidate identity
	// that holds shards, and how many.
	// +optional
	// +listType=map
	// +listMapKey=identity
	ShardHolders []ShardHolderStatus `json:"shardHolders,omitempty"`
	// nodes reports each Redis node, in the order of spec.redis.addrs, in
	// Redlock mode.
	// +optional
	// +listType=atomic
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// effectiveTiming is the timing candidates use for the lock: the spec's,
	// with an unset renewInterval or renewDeadline derived from ttl. The
	// controller sets it; kubectl get -o wide shows it.
	// +optional
	EffectiveTiming *EffectiveTiming `json:"effectiveTiming,omitempty"`
	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Ready, Held and RedisReachable, and ShardsUnowned
	// for a sharded lock.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RedisLock declares a named lock held in Redis, and shows its live holder.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rl,categories=all
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.holderIdentity`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.redis.mode`
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.status.connection`
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.spec.scope`,priority=1
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.ttl`
// +kubebuilder:printcolumn:name="RenewInterval",type=string,JSONPath=`.status.effectiveTiming.renewInterval`,priority=1
// +kubebuilder:printcolumn:name="RenewDeadline",type=string,JSONPath=`.status.effectiveTiming.renewDeadline`,priority=1
// +kubebuilder:printcolumn:name="Transitions",type=integer,JSONPath=`.status.leaderTransitions`
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.shardsHeld`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisLock struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec declares the lock.
	// +required
	Spec RedisLockSpec `json:"spec"`
	// status is the lock's live state.
	// +optional
	Status RedisLockStatus `json:"status,omitempty"`
}

// RedisLockList is a list of RedisLocks.
// +kubebuilder:object:root=true
type RedisLockList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the RedisLocks.
	Items []RedisLock `json:"items"`
}
