package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/redislock/redislock/api/v1alpha1"
)

// EventConnectionInUse is the reason of the event on a connection whose
// deletion waits for the RedisLocks that use it.
const EventConnectionInUse = "InUse"

// ConnectionProtection keeps a RedisConnection or ClusterRedisConnection
// from going while RedisLocks use it, as Kubernetes protects a
// PersistentVolumeClaim a pod uses: a finalizer while it is in use, removed
// once no RedisLock it serves names it (a lock in a namespace that a
// ClusterRedisConnection does not allow never pins it). Deleted and
// created again with other servers under running candidates, a connection
// would give two leaders for every lock on it; protected, it can be
// replaced only once its locks are gone.
//
// The finalizer is named for what this controller sees (its lock class and
// watched namespaces), so that controllers that see different locks never
// remove each other's.
type ConnectionProtection struct {
	client.Client
	Recorder events.EventRecorder
	// Finalizer is ConnectionFinalizer of the controller's lock class and
	// watched namespaces.
	Finalizer string
}

// ConnectionFinalizer is the finalizer name of the controllers of class
// that watch namespaces (nil: all): "redislock.io/in-use", with a suffix
// for any other class or set of namespaces.
func ConnectionFinalizer(class string, namespaces []string) string {
	if class == "" && len(namespaces) == 0 {
		return "redislock.io/in-use"
	}
	ns := slices.Sorted(slices.Values(namespaces))
	sum := sha256.Sum256([]byte(class + "\x00" + strings.Join(ns, ",")))
	return "redislock.io/in-use-" + hex.EncodeToString(sum[:4])
}

// +kubebuilder:rbac:groups=redislock.io,resources=redisconnections;clusterredisconnections,verbs=patch

// reconcile sets or removes the finalizer on the connection of kind named
// by req.
func (p *ConnectionProtection) reconcile(ctx context.Context, kind v1alpha1.ConnectionKind, req ctrl.Request) error {
	var conn client.Object = &v1alpha1.RedisConnection{}
	if kind == v1alpha1.KindClusterRedisConnection {
		conn = &v1alpha1.ClusterRedisConnection{}
	}
	if err := p.Get(ctx, req.NamespacedName, conn); err != nil {
		return client.IgnoreNotFound(err)
	}
	var users v1alpha1.RedisLockList
	if err := p.List(ctx, &users, client.InNamespace(req.Namespace), client.MatchingFields{connectionIndex: string(kind) + "/" + req.Name}); err != nil {
		return fmt.Errorf("list the RedisLocks on %s %s: %w", kind, req.NamespacedName, err)
	}
	// Only the locks a connection serves may pin it: a lock in a namespace
	// that a ClusterRedisConnection does not allow is InvalidSpec, and
	// must not let a tenant block an admin's deletion of it.
	var names []string
	for _, u := range users.Items {
		if c, ok := conn.(*v1alpha1.ClusterRedisConnection); !ok || c.Spec.Allows(u.Namespace) {
			names = append(names, u.Namespace+"/"+u.Name)
		}
	}
	inUse := len(names) > 0
	if inUse && !conn.GetDeletionTimestamp().IsZero() {
		slices.Sort(names)
		p.Recorder.Eventf(conn, nil, corev1.EventTypeNormal, EventConnectionInUse, "Delete", "deletion waits for the RedisLocks that use this connection: %s", strings.Join(names, ", "))
	}
	before := conn.DeepCopyObject().(client.Object)
	changed := false
	if inUse && conn.GetDeletionTimestamp().IsZero() {
		changed = controllerutil.AddFinalizer(conn, p.Finalizer)
	} else if !inUse {
		changed = controllerutil.RemoveFinalizer(conn, p.Finalizer)
	}
	if !changed {
		return nil
	}
	err := p.Patch(ctx, conn, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SetupWithManager registers one controller per connection kind; each
// watches its kind and the RedisLocks, for the connection a lock names.
// It needs the RedisLockReconciler's connection index, so it is set up
// after that.
func (p *ConnectionProtection) SetupWithManager(mgr ctrl.Manager) error {
	if p.Finalizer == "" {
		return errors.New("controller: ConnectionProtection.Finalizer is empty")
	}
	for _, kind := range []v1alpha1.ConnectionKind{v1alpha1.KindRedisConnection, v1alpha1.KindClusterRedisConnection} {
		var obj client.Object = &v1alpha1.RedisConnection{}
		if kind == v1alpha1.KindClusterRedisConnection {
			obj = &v1alpha1.ClusterRedisConnection{}
		}
		err := ctrl.NewControllerManagedBy(mgr).
			For(obj).
			Watches(&v1alpha1.RedisLock{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				used := connectionOf(o) // "<kind>/<name>", kind defaulted
				connName, ok := strings.CutPrefix(strings.Join(used, ""), string(kind)+"/")
				if !ok {
					return nil
				}
				name := client.ObjectKey{Name: connName}
				if kind == v1alpha1.KindRedisConnection {
					name.Namespace = o.GetNamespace()
				}
				return []reconcile.Request{{NamespacedName: name}}
			})).
			Named(strings.ToLower(string(kind)) + "-protection").
			Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
				return ctrl.Result{}, p.reconcile(ctx, kind, req)
			}))
		if err != nil {
			return err
		}
	}
	return nil
}
