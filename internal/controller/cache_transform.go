package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
)

// StripManagedFields is the manager cache's transform of RedisLocks: it
// drops their managedFields, which the controller does not read, unless an
// Update wrote status fields: then adoptStatus needs every entry to take
// those fields over (its patch replaces the whole list). The entries were
// the largest part of a cached RedisLock.
func StripManagedFields(obj any) (any, error) {
	rl, ok := obj.(*v1alpha1.RedisLock)
	if !ok {
		return obj, nil
	}
	for _, f := range rl.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "status" {
			return rl, nil
		}
	}
	rl.ManagedFields = nil
	return rl, nil
}
