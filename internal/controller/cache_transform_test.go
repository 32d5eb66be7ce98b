package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
)

// The cache keeps a RedisLock's managedFields only when an Update wrote
// its status, and then every entry.
func TestStripManagedFieldsKeepsThemOnlyForAStatusUpdate(t *testing.T) {
	apply := metav1.ManagedFieldsEntry{Manager: fieldOwner, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"}
	update := metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate}
	statusUpdate := metav1.ManagedFieldsEntry{Manager: "redislock-v0", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}
	for _, tc := range []struct {
		entries []metav1.ManagedFieldsEntry
		keep    bool
	}{
		{[]metav1.ManagedFieldsEntry{apply, update}, false},
		{[]metav1.ManagedFieldsEntry{apply, update, statusUpdate}, true},
	} {
		rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
		got, err := StripManagedFields(rl)
		if err != nil {
			t.Fatal(err)
		}
		n := len(got.(*v1alpha1.RedisLock).ManagedFields)
		if want := map[bool]int{true: len(tc.entries), false: 0}[tc.keep]; n != want {
			t.Errorf("managers %v: %d entries kept; want %d", tc.entries, n, want)
		}
	}
	if got, err := StripManagedFields("not a RedisLock"); err != nil || got != "not a RedisLock" {
		t.Errorf("another object: %v, %v; want it unchanged", got, err)
	}
}
