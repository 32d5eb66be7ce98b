package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingReader serves Secrets from a map and counts its reads: the
// cache's decisions are pure logic over a reader and a clock (the
// controller's envtest tests count its reads of the real API server).
type countingReader struct {
	client.Reader
	data  map[types.NamespacedName]map[string][]byte
	reads int
}

func (r *countingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	d, ok := r.data[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.(*corev1.Secret).Data = d
	return nil
}

// A Secret is read once per SecretRefresh while its lock works, anew after
// a failure forgot it, and never cached while missing.
func TestSecretCacheReadsOncePerRefreshAndAfterAFailure(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "auth"}
	api := &countingReader{data: map[types.NamespacedName]map[string][]byte{key: {"password": []byte("a")}}}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	c := newSecretCache(api, clk)
	read := func() (string, error) {
		var s corev1.Secret
		err := c.reader(nil).Get(context.Background(), key, &s)
		return string(s.Data["password"]), err
	}
	step := func(what string, advance time.Duration, wantReads int, want string) {
		t.Helper()
		clk.SetTime(clk.Now().Add(advance))
		got, err := read()
		if err != nil || got != want || api.reads != wantReads {
			t.Fatalf("%s: %q, %v after %d reads; want %q after %d", what, got, err, api.reads, want, wantReads)
		}
	}
	step("first read", 0, 1, "a")
	api.data[key]["password"] = []byte("b")
	step("within the refresh", SecretRefresh-time.Second, 1, "a")
	step("at the refresh", time.Second, 2, "b")
	api.data[key]["password"] = []byte("c")
	r := c.reader(nil)
	var s corev1.Secret
	if err := r.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	r.forget() // the lock failed
	step("after a failure", 0, 3, "c")

	missing := types.NamespacedName{Namespace: "ns", Name: "none"}
	for i := range 2 {
		if err := c.reader(nil).Get(context.Background(), missing, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Fatalf("read %d of a missing Secret: %v; want NotFound", i, err)
		}
	}
	if api.reads != 5 {
		t.Fatalf("%d reads; want a missing Secret read each time (5 in all)", api.reads)
	}
}
