package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/inject"
)

// CreateInjectedPod creates pod through c and returns the agent container
// (inject.ContainerName) that the webhook added to it, within timeout. The
// webhook server may still be starting, and the API server then refuses
// the pod (failurePolicy Fail) or admits it untouched (Ignore): pod is
// created again, an untouched one deleted first, until one is injected.
// pod itself is not changed.
func CreateInjectedPod(ctx context.Context, c client.Client, pod *corev1.Pod, timeout time.Duration) (corev1.Container, error) {
	var agent corev1.Container
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p := pod.DeepCopy()
		if c.Create(ctx, p) != nil {
			return false, nil // the untouched pod's deletion is still under way
		}
		for _, ctr := range p.Spec.InitContainers {
			if ctr.Name == inject.ContainerName {
				agent = ctr
				return true, nil
			}
		}
		_ = c.Delete(ctx, p, client.GracePeriodSeconds(0)) // if it stays, the next Create fails and tries again
		return false, nil
	})
	if err != nil {
		return corev1.Container{}, fmt.Errorf("waiting for the webhook to inject pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return agent, nil
}
