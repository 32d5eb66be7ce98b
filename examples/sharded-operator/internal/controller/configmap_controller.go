/*
Copyright 2026.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package controller reconciles the ConfigMaps labelled
// example.com/sharded=true: each is annotated with the replica, the shard
// and the shard's fencing token that reconciled it last.
package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/redislock/redislock/pkg/mgrsharding"
)

const (
	// Label selects the ConfigMaps this operator reconciles.
	Label = "example.com/sharded"
	// Annotation is where it writes who reconciled the ConfigMap:
	// <replica>/<shard>/<fencing token>, or <replica> unsharded.
	Annotation = "example.com/reconciled-by"
)

// ConfigMapReconciler annotates each labelled ConfigMap.
type ConfigMapReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch;update

// Reconcile writes the annotation if it names another replica, shard or
// token, and logs "reconciled" with when it began and ended, once it has
// checked that its shard was still held at the end.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	log := logf.FromContext(ctx)
	by, _ := os.Hostname()
	if id := os.Getenv("POD_NAME"); id != "" {
		by = id
	}
	if s, ok := mgrsharding.FromContext(ctx); ok {
		by = fmt.Sprintf("%s/%d/%d", by, s.Index, s.Fence)
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil || cm.Labels[Label] != "true" {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Annotations[Annotation] != by {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[Annotation] = by
		if err := r.Update(ctx, &cm); err != nil {
			return ctrl.Result{}, err
		}
	}
	end := time.Now()
	if _, sharded := mgrsharding.FromContext(ctx); sharded {
		// A reconcile paused past its shard's deadline (a frozen
		// process) did not finish as its holder.
		if err := mgrsharding.Valid(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	log.Info("reconciled", "by", by, "start", start.Format(time.RFC3339Nano), "end", end.Format(time.RFC3339Nano))
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller. With a Sharding, it
// reconciles only the ConfigMaps of the shards this replica holds, those
// of a shard it gains again at once, and runs on every replica.
func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager, sharding *mgrsharding.Sharding) error {
	labelled := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[Label] == "true" })
	b := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}, builder.WithPredicates(labelled)).Named("configmap")
	if sharding == nil {
		return b.Complete(r)
	}
	return b.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(sharding.Requeue(mgr.GetCache(), &corev1.ConfigMapList{}, client.MatchingLabels{Label: "true"})).
		Complete(sharding.Reconciler(r))
}
