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

// RedisTLS turns on TLS to Redis.
type RedisTLS struct {
	// caSecretRef names the PEM CA bundle that signs the servers'
	// certificates. Unset: the system roots.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
	// serverName overrides the name checked in the servers' certificates.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// RedisConnection says how to reach Redis. Field names follow go-redis's
// UniversalOptions where they mean the same thing.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Standalone' || size(self.addrs) == 1",message="Standalone mode takes exactly one address in addrs",fieldPath=".addrs"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Redlock' || size(self.addrs) % 2 == 1",message="Redlock mode needs an odd number of addrs, so that two majorities always overlap",fieldPath=".addrs"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' ? has(self.masterName) : !has(self.masterName)",message="masterName is required in Sentinel mode and allowed only there",fieldPath=".masterName"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Cluster' || !has(self.db) || self.db == 0",message="Cluster mode has only db 0",fieldPath=".db"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Sentinel' || !has(self.waitReplicas)",message="waitReplicas is allowed only in Sentinel mode",fieldPath=".waitReplicas"
type RedisConnection struct {
	// mode is Standalone (one server), Redlock (an odd number of
	// independent servers), Sentinel (a master found through Sentinels) or
	// Cluster.
	// +optional
	// +kubebuilder:default=Standalone
	Mode RedisMode `json:"mode,omitempty"`
	// addrs are host:port addresses, without a scheme ("[::1]:6379" for
	// IPv6): the server (Standalone), each independent server (Redlock),
	// the Sentinels (Sentinel) or seed nodes (Cluster).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=15
	// +kubebuilder:validation:items:Pattern=`^([^\s/:@\[\]]+|\[[0-9a-fA-F:.]+\]):[0-9]{1,5}$`
	// +kubebuilder:validation:items:MaxLength=261
	Addrs []string `json:"addrs"`
	// masterName is the Sentinel master's name; Sentinel mode only.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MasterName string `json:"masterName,omitempty"`
	// db is the database number; 0 in Cluster mode.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	DB *int32 `json:"db,omitempty"`
	// usernameSecretRef names the ACL username. Unset: the default user.
	// +optional
	UsernameSecretRef *SecretKeyRef `json:"usernameSecretRef,omitempty"`
	// passwordSecretRef names the password. Unset: no AUTH.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
	// tls, when set, connects with TLS.
	// +optional
	TLS *RedisTLS `json:"tls,omitempty"`
	// nodeTimeout bounds each call to each node; it must be shorter than
	// ttl. Redlock advises a small fraction of the ttl.
	// +optional
	// +kubebuilder:default="200ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms')",message="nodeTimeout must be at least 1ms"
	NodeTimeout *metav1.Duration `json:"nodeTimeout,omitempty"`
	// waitReplicas is how many of the master's replicas must acknowledge
	// each acquisition and renewal (Redis WAIT, within nodeTimeout) before
	// it counts; Sentinel mode only, default 1. A Sentinel failover then
	// promotes a replica that has the lock, so no holder believes in a key
	// the new master lacks. 0 trades that for availability when no replica
	// answers.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	WaitReplicas *int32 `json:"waitReplicas,omitempty"`
}

// RedisLockSpec declares one named lock.
// +kubebuilder:validation:XValidation:rule="duration(self.renewInterval) < duration(self.renewDeadline)",message="renewInterval must be shorter than renewDeadline",fieldPath=".renewInterval"
// +kubebuilder:validation:XValidation:rule="duration(self.renewDeadline) < duration(self.ttl)",message="renewDeadline must be shorter than ttl",fieldPath=".renewDeadline"
// +kubebuilder:validation:XValidation:rule="!has(self.redis.nodeTimeout) || duration(self.redis.nodeTimeout) < duration(self.ttl)",message="redis.nodeTimeout must be shorter than ttl",fieldPath=".redis.nodeTimeout"
type RedisLockSpec struct {
	// redis says how to reach the Redis deployment that holds the lock.
	// +required
	Redis RedisConnection `json:"redis"`
	// lockName names the lock within this namespace; the lock in Redis is
	// "<namespace>/<lockName>", so locks of different namespaces never
	// meet. Default: the object's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^{}\s]+$`
	LockName string `json:"lockName,omitempty"`
	// ttl is how long the lock lives after each acquire or renew, as
	// client-go's LeaseDuration: a crashed holder is replaced after at
	// most this long. A whole number of milliseconds (the controller
	// reports other values in the Ready condition).
	// +optional
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms')",message="ttl must be at least 1ms"
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// renewInterval is how often the holder renews, as client-go's
	// RetryPeriod.
	// +optional
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms')",message="renewInterval must be at least 1ms"
	RenewInterval *metav1.Duration `json:"renewInterval,omitempty"`
	// renewDeadline is how long the holder keeps trying to renew before it
	// steps down, as client-go's RenewDeadline.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms')",message="renewDeadline must be at least 1ms"
	RenewDeadline *metav1.Duration `json:"renewDeadline,omitempty"`
	// deletionPolicy says what deleting this object does to the lock in
	// Redis: Retain leaves it and its holder alone; Release deletes the
	// current holder's key first, so the holder loses the lock at its next
	// renewal.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
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

// Condition types of a RedisLock.
const (
	// ConditionReady is True when the spec is usable and Redis answers.
	ConditionReady = "Ready"
	// ConditionHeld is True while a candidate holds the lock.
	ConditionHeld = "Held"
	// ConditionRedisReachable is True when a majority of nodes answer.
	ConditionRedisReachable = "RedisReachable"
)

// RedisLockStatus is the live state of the lock, as read from Redis. It
// never shows the holder's token.
type RedisLockStatus struct {
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
	// the current holder's while one holds it on a single node.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`
	// nodes reports each Redis node, in the order of spec.redis.addrs, in
	// Redlock mode.
	// +optional
	// +listType=atomic
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Ready, Held and RedisReachable.
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
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.ttl`
// +kubebuilder:printcolumn:name="Transitions",type=integer,JSONPath=`.status.leaderTransitions`
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
