package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWrites remembers, for each RedisLock, the resourceVersion of the
// controller's last write to it, until the object is gone. A reconcile
// that reads an older copy does nothing: the watch event for the write is
// on its way and starts the next reconcile, which sees it. Without this,
// that reconcile would redo the write from the state before it (one more
// status apply) and record its events (LeaderChanged) twice. It happens
// after every reconcile that writes both the metadata and the status: the
// metadata patch's watch event starts a reconcile that can read the cache
// before the status apply reaches it.
type ownWrites struct {
	mu   sync.Mutex
	last map[types.NamespacedName]written
}

type written struct {
	uid             types.UID
	resourceVersion string
}

// record notes obj, as the API server returned it from a write.
func (w *ownWrites) record(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[types.NamespacedName]written{}
	}
	w.last[client.ObjectKeyFromObject(obj)] = written{obj.GetUID(), obj.GetResourceVersion()}
}

// behind reports whether obj, as read from the cache, is older than the
// controller's last write to the same object. A resourceVersion that
// cannot be compared (a storage other than etcd) is never behind: the
// reconcile goes ahead, as it would without this check.
func (w *ownWrites) behind(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[client.ObjectKeyFromObject(obj)]
	if !ok || last.uid != obj.GetUID() {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), last.resourceVersion)
	return err == nil && c < 0
}

// forget drops what is known of the object at key, once it is gone.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}
