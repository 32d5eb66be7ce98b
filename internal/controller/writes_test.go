package controller_test

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// Requests the reconciler makes, as recorded.
const (
	reqGet         = "get"
	reqPatch       = "patch"
	reqUpdate      = "update"
	reqStatusApply = "status apply"
	// reqAPIGet is a read through the APIReader, which the API server
	// serves; reqGet is a read of the manager's cache.
	reqAPIGet = "api get"
)

// requests records what the reconciler under test asks the API server,
// with the reconcile that asked.
var requests requestLog

type requestLog struct {
	mu  sync.Mutex
	all []request
	// failPatches is how many of the next metadata patches of each
	// object fail, as if the API server were unavailable.
	failPatches map[client.ObjectKey]int
	// stale is what the next read of each object returns instead of
	// the cache's copy, as a cache that lags behind.
	stale map[client.ObjectKey]client.Object
	// staleReads are the reconciles that were served a stale copy.
	staleReads []types.UID
}

// serveStale makes the reconciler's next read of obj's key return obj.
func (l *requestLog) serveStale(obj client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stale == nil {
		l.stale = map[client.ObjectKey]client.Object{}
	}
	l.stale[client.ObjectKeyFromObject(obj)] = obj
}

// takeStale returns the stale copy to serve for key, once, or nil, and
// notes the reconcile it is served to.
func (l *requestLog) takeStale(ctx context.Context, key client.ObjectKey) client.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	obj, ok := l.stale[key]
	if ok {
		delete(l.stale, key)
		l.staleReads = append(l.staleReads, controller.ReconcileIDFromContext(ctx))
	}
	return obj
}

// writesIn returns the writes reconcile id made.
func (l *requestLog) writesIn(id types.UID) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.all {
		if r.reconcile == id && r.verb != reqGet && r.verb != reqAPIGet {
			out = append(out, r.verb)
		}
	}
	return out
}

// failNextPatch makes the reconciler's next metadata patch of obj fail.
func (l *requestLog) failNextPatch(obj client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failPatches == nil {
		l.failPatches = map[client.ObjectKey]int{}
	}
	l.failPatches[client.ObjectKeyFromObject(obj)]++
}

// injectedFailure reports whether the patch of key is to fail, and counts it.
func (l *requestLog) injectedFailure(key client.ObjectKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failPatches[key] == 0 {
		return false
	}
	l.failPatches[key]--
	return true
}

type request struct {
	reconcile types.UID // controller-runtime's reconcile ID
	key       client.ObjectKey
	verb      string
}

func (l *requestLog) add(ctx context.Context, key client.ObjectKey, verb string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, request{controller.ReconcileIDFromContext(ctx), key, verb})
}

// reconciles returns, for each reconcile of key in the order they started,
// the writes it made (none for a reconcile that only read).
func (l *requestLog) reconciles(key client.ObjectKey) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var order []types.UID
	by := map[types.UID][]string{}
	for _, r := range l.all {
		if r.key != key || r.reconcile == "" {
			continue
		}
		if _, seen := by[r.reconcile]; !seen {
			order = append(order, r.reconcile)
			by[r.reconcile] = []string{}
		}
		if r.verb != reqGet && r.verb != reqAPIGet {
			by[r.reconcile] = append(by[r.reconcile], r.verb)
		}
	}
	out := make([][]string, len(order))
	for i, id := range order {
		out[i] = by[id]
	}
	return out
}

// reconcilesIn returns how many reconciles of objects in namespace ns
// have been recorded so far.
func (l *requestLog) reconcilesIn(ns string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[types.UID]bool{}
	for _, r := range l.all {
		if r.key.Namespace == ns && r.reconcile != "" {
			seen[r.reconcile] = true
		}
	}
	return len(seen)
}

// writesOf returns the writes of each reconcile of obj that wrote, in
// order, and fails t unless every reconcile wrote at most once: the
// metadata patch, then the status apply, each at most once and nothing
// else.
func writesOf(t *testing.T, obj client.Object) [][]string {
	t.Helper()
	var out [][]string
	for _, w := range requests.reconciles(client.ObjectKeyFromObject(obj)) {
		if len(w) == 0 {
			continue
		}
		if !slices.Equal(w, []string{reqPatch}) && !slices.Equal(w, []string{reqStatusApply}) && !slices.Equal(w, []string{reqPatch, reqStatusApply}) {
			t.Fatalf("one reconcile of %s made the writes %q; want at most one metadata patch, then at most one status apply", obj.GetName(), w)
		}
		out = append(out, w)
	}
	return out
}

// waitReconciles waits until obj has been reconciled n more times than
// the n0 its reconciles numbered before.
func waitReconciles(t *testing.T, obj client.Object, n0, n int, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	waitFor(t, timeout, "reconciles of "+key.String(), func() (bool, any) {
		got := len(requests.reconciles(key))
		return got >= n0+n, got
	})
}

// recordingAPIReader is the reconciler's APIReader: the manager's,
// recording into requests every read it makes of the API server.
type recordingAPIReader struct{ client.Reader }

func (r recordingAPIReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	requests.add(ctx, key, reqAPIGet)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// since returns the requests of key made after the first n requests.
func (l *requestLog) since(n int, key client.ObjectKey) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.all[n:] {
		if r.key == key {
			out = append(out, r.verb)
		}
	}
	return out
}

// count is how many requests there are so far.
func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// recordingClient is the reconciler's client: the manager's, recording
// into requests every read of one object and every write it makes.
type recordingClient struct{ client.Client }

func (c recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	requests.add(ctx, key, reqGet)
	if stale := requests.takeStale(ctx, key); stale != nil {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stale.DeepCopyObject()).Elem())
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	requests.add(ctx, client.ObjectKeyFromObject(obj), reqUpdate)
	return c.Client.Update(ctx, obj, opts...)
}

func (c recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	key := client.ObjectKeyFromObject(obj)
	requests.add(ctx, key, reqPatch)
	if requests.injectedFailure(key) {
		return apierrors.NewServiceUnavailable("injected by the test")
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c recordingClient) Status() client.SubResourceWriter {
	return recordingStatus{c.Client.Status()}
}

// recordingStatus records the status writes of a recordingClient.
type recordingStatus struct{ client.SubResourceWriter }

func (s recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	requests.add(ctx, client.ObjectKeyFromObject(obj), "status update")
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	requests.add(ctx, client.ObjectKeyFromObject(obj), "status patch")
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s recordingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	key := client.ObjectKey{}
	if o, ok := obj.(interface {
		GetNamespace() string
		GetName() string
	}); ok {
		key = client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	requests.add(ctx, key, reqStatusApply)
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

func (c recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	requests.add(ctx, client.ObjectKeyFromObject(obj), "create")
	return c.Client.Create(ctx, obj, opts...)
}

func (c recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	requests.add(ctx, client.ObjectKeyFromObject(obj), "delete")
	return c.Client.Delete(ctx, obj, opts...)
}

// countWrites counts verb in the writes of reconciles.
func countWrites(reconciles [][]string, verb string) int {
	n := 0
	for _, w := range reconciles {
		for _, v := range w {
			if v == verb {
				n++
			}
		}
	}
	return n
}
