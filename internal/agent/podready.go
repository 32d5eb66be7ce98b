package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/redislock/redislock/internal/agentflags"
)

// The agent's service account needs list and watch on pods for the
// health signal healthprobe.Ready: the redislock-agent-pod-reader
// ClusterRole (config/rbac/agent/pod_reader.yaml), bound in the pod's
// namespace. The redislock-agent ClusterRole does not grant it: a pod
// that does not use the signal reads no other pod.

// errPodGone is the app's health once the agent's pod is deleted.
var errPodGone = errors.New("the pod is deleted")

// watchPodReady keeps a.health from the Ready of the pod's app containers
// (podReady) until ctx ends: one list, then one watch of the pod, by name,
// and nothing else sent to the API server, nor to Redis (see
// healthSetter). Until the first list succeeds, its error is the health's
// reason (a missing grant shows in /leader; the reflector logs it); a
// watch that breaks later keeps the last verdict while the informer lists
// again.
func (a *Agent) watchPodReady(ctx context.Context, notify func()) {
	set := a.healthSetter(notify)
	lw := cache.NewListWatchFromClient(a.pods, "pods", a.o.Lock.Namespace, fields.OneTermEqualSelector("metadata.name", a.o.Identity))
	inf := cache.NewSharedInformer(lw, &corev1.Pod{}, 0)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(podReady(obj)) },
		UpdateFunc: func(_, obj any) { set(podReady(obj)) },
		DeleteFunc: func(any) { set(errPodGone) },
	}); err != nil {
		set(fmt.Errorf("watching pod %s: %w", a.o.Identity, err))
		return
	}
	// The handlers and this one run on the informer's goroutines, one at
	// a time: the error handler only before the first list succeeded.
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !inf.HasSynced() {
			a.health.Set(fmt.Errorf("reading pod %s: %w", a.o.Identity, err))
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		set(fmt.Errorf("watching pod %s: %w", a.o.Identity, err))
		return
	}
	inf.RunWithContext(ctx)
}

// podReady is the health of obj, a *corev1.Pod: nil while each of its app
// containers (not the agent's, agentflags.ContainerName; init and sidecar
// containers are not counted) is Ready in its status, else why not.
func podReady(obj any) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("watching the pod: got a %T", obj)
	}
	apps := 0
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == agentflags.ContainerName {
			continue
		}
		apps++
		if !cs.Ready {
			return fmt.Errorf("container %s of pod %s is not Ready", cs.Name, pod.Name)
		}
	}
	if apps == 0 {
		return fmt.Errorf("pod %s reports no app container yet", pod.Name)
	}
	return nil
}
