package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
)

// write stores what a reconcile changed in rl since before, the object as
// read, making no request for a part that did not change: first the
// metadata (finalizers, annotations) as one merge patch that fails if the
// object changed since it was read, so that a finalizer another writer
// added in between is not lost; then the status by applyStatus. It tries
// both and returns both errors.
func (r *RedisLockReconciler) write(ctx context.Context, before, rl *v1alpha1.RedisLock) error {
	var errs []error
	latest := rl // the newest resourceVersion and managedFields known
	if !equality.Semantic.DeepEqual(before.ObjectMeta, rl.ObjectMeta) {
		// A copy with the status as read: the response, which carries the
		// stored status, must not overwrite the status still to apply.
		m := before.DeepCopy()
		m.ObjectMeta = *rl.ObjectMeta.DeepCopy()
		if err := r.Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			errs = append(errs, fmt.Errorf("patch metadata: %w", err))
		} else {
			latest = m
			r.own.record(m)
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, rl.Status) {
		if err := r.applyStatus(ctx, rl.Status, latest); err != nil {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// applyStatus applies status as the whole status of rl, owned by the
// controller: no conflict with other writers of the object, and no lost
// update from a stale cache, as a merge patch against it would risk.
func (r *RedisLockReconciler) applyStatus(ctx context.Context, status v1alpha1.RedisLockStatus, rl *v1alpha1.RedisLock) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.RedisLock{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisLock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: rl.Namespace, Name: rl.Name},
		Status:     status,
	})
	if err != nil {
		return fmt.Errorf("status to apply: %w", err)
	}
	delete(u, "spec")
	if err := r.adoptStatus(ctx, rl); err != nil {
		return fmt.Errorf("take over status fields written by update: %w", err)
	}
	applied := &unstructured.Unstructured{Object: u}
	if err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply status: %w", err)
	}
	r.own.record(applied)
	return nil
}

// adoptStatus moves to fieldOwner the status fields that an Update wrote
// (this controller before it applied status, or anyone else), once: an
// apply removes only fields its own manager owns, so without this a field
// an older version set (a holderIdentity, an acquireTime) would stay when
// the apply leaves it out.
func (r *RedisLockReconciler) adoptStatus(ctx context.Context, rl *v1alpha1.RedisLock) error {
	updaters := sets.New[string]()
	for _, f := range rl.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "status" {
			updaters.Insert(f.Manager)
		}
	}
	if updaters.Len() == 0 {
		return nil
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(rl, updaters, fieldOwner, csaupgrade.Subresource("status"))
	if err != nil || patch == nil {
		return err
	}
	return r.Patch(ctx, rl.DeepCopy(), client.RawPatch(types.JSONPatchType, patch))
}

// fieldOwner manages the status fields the controller applies.
const fieldOwner = "redislock-controller"
