package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConnectionKind names a kind of shared connection.
// +kubebuilder:validation:Enum=RedisConnection;ClusterRedisConnection
type ConnectionKind string

// The connection kinds.
const (
	// KindRedisConnection is a RedisConnection in the RedisLock's namespace.
	KindRedisConnection ConnectionKind = "RedisConnection"
	// KindClusterRedisConnection is a ClusterRedisConnection.
	KindClusterRedisConnection ConnectionKind = "ClusterRedisConnection"
)

// ConnectionRef names the shared connection a RedisLock uses.
type ConnectionRef struct {
	// kind is RedisConnection (in the RedisLock's namespace, the default)
	// or ClusterRedisConnection.
	// +optional
	// +kubebuilder:default=RedisConnection
	Kind ConnectionKind `json:"kind,omitempty"`
	// name is the connection's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RedisConnection says how to reach one Redis deployment, for the
// RedisLocks of its namespace that name it in spec.connectionRef, as
// cert-manager's Issuer serves the Certificates of its namespace. The
// Secrets it names are in its namespace. Its mode, addrs, masterName and
// db are immutable: every lock on it lives on those servers, and
// candidates already running would go on using the old ones.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rconn,categories=all
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Addrs",type=string,JSONPath=`.spec.addrs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisConnection struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec says how to reach Redis.
	// +required
	Spec RedisConnectionSpec `json:"spec"`
}

// RedisConnectionList is a list of RedisConnections.
// +kubebuilder:object:root=true
type RedisConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the RedisConnections.
	Items []RedisConnection `json:"items"`
}

// ClusterRedisConnectionSpec is a RedisConnectionSpec whose Secrets are in
// secretNamespace.
// +kubebuilder:validation:XValidation:rule="has(self.secretNamespace) == has(oldSelf.secretNamespace) && (!has(self.secretNamespace) || self.secretNamespace == oldSelf.secretNamespace)",message="secretNamespace cannot be changed, set or unset: create a new ClusterRedisConnection instead",fieldPath=".secretNamespace"
// +kubebuilder:validation:XValidation:rule="has(self.secretNamespace) || !(has(self.usernameSecretRef) || has(self.passwordSecretRef) || has(self.sentinelUsernameSecretRef) || has(self.sentinelPasswordSecretRef) || (has(self.tls) && (has(self.tls.caSecretRef) || has(self.tls.certSecretRef))))",message="secretNamespace is required when the connection names Secrets: a ClusterRedisConnection belongs to no namespace",fieldPath=".secretNamespace"
type ClusterRedisConnectionSpec struct {
	RedisConnectionSpec `json:",inline"`
	// secretNamespace is the namespace of the Secrets the connection
	// names. Every candidate of a lock on this connection reads them with
	// its own service account, so grant get on those Secrets to the
	// service accounts that may use it. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// allowedNamespaces are the namespaces whose RedisLocks may use the
	// connection (and so have the controller use its credentials for
	// them: force-release, release on delete, status); empty: every
	// namespace. A lock elsewhere is Ready=False, InvalidSpec.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// tenantSecretName confines each namespace's candidates to that
	// namespace's locks inside Redis. When set, a candidate (the agent,
	// the plugin) of a lock in namespace N authenticates with the keys
	// username and password of Secret N/<tenantSecretName>: a Redis user
	// that may touch only N's lock keys and channels, and the Global names
	// it was granted (`redislock tenant-acl` prints its ACL rules). The
	// candidate then reads no Secret of secretNamespace but the TLS ones;
	// the controller keeps the connection's own credentials. Unset: every
	// candidate uses the connection's credentials, and with them could
	// write any key of that Redis.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TenantSecretName string `json:"tenantSecretName,omitempty"`
}

// Allows reports whether the RedisLocks of namespace may use the
// connection: allowedNamespaces is empty or lists namespace.
func (s *ClusterRedisConnectionSpec) Allows(namespace string) bool {
	return len(s.AllowedNamespaces) == 0 || slices.Contains(s.AllowedNamespaces, namespace)
}

// ClusterRedisConnection says how to reach one Redis deployment, for the
// RedisLocks of every namespace that name it in spec.connectionRef, as
// cert-manager's ClusterIssuer does for Certificates. Its mode, addrs,
// masterName and db are immutable, as a RedisConnection's.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=crconn
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Addrs",type=string,JSONPath=`.spec.addrs`
// +kubebuilder:printcolumn:name="SecretNamespace",type=string,JSONPath=`.spec.secretNamespace`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterRedisConnection struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec says how to reach Redis.
	// +required
	Spec ClusterRedisConnectionSpec `json:"spec"`
}

// ClusterRedisConnectionList is a list of ClusterRedisConnections.
// +kubebuilder:object:root=true
type ClusterRedisConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ClusterRedisConnections.
	Items []ClusterRedisConnection `json:"items"`
}
