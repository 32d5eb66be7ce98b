package redisconn

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
)

// ErrClusterID means this cluster's identity could not be read.
var ErrClusterID = errors.New("redisconn: cluster identity")

// ClusterNamespace is the namespace whose UID identifies a cluster: it
// exists in every cluster, for as long as the cluster does.
const ClusterNamespace = "kube-system"

// ClusterID returns this cluster's identity, the UID of its kube-system
// namespace, read through r (which needs get on that namespace).
func ClusterID(ctx context.Context, r client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: ClusterNamespace}, &ns); err != nil {
		return "", fmt.Errorf("%w: read the UID of namespace %s (needs get on it, or give the identity): %w", ErrClusterID, ClusterNamespace, err)
	}
	return string(ns.UID), nil
}

// LockName returns the lock's name in Redis. With scope Cluster it is
// "<clusterID>/<namespace>/<lockName>": the cluster and the namespace keep
// apart the locks of different clusters and namespaces whatever their
// specs say. With scope Global it is "global/<lockName>", the same in
// every cluster. lockName defaults to the object's name. No name of one
// scope can be one of the other: a cluster's identity is a UID, never
// "global".
func LockName(rl *v1alpha1.RedisLock, clusterID string) string {
	name := rl.Spec.LockName
	if name == "" {
		name = rl.Name
	}
	if rl.Spec.Scope == v1alpha1.ScopeGlobal {
		return globalName(name)
	}
	return clusterName(clusterID, rl.Namespace, name)
}

// globalName is the Redis lock name of the Global lock name.
func globalName(name string) string { return "global/" + name }

// clusterName is the Redis lock name of namespace's lock name in the
// cluster clusterID; with name "", the prefix of all of them.
func clusterName(clusterID, namespace, name string) string {
	return clusterID + "/" + namespace + "/" + name
}
