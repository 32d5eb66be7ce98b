package cluster

import (
	"context"
	"testing"
	"time"
)

// The second way to install: `kubectl apply -k config/default` (Lease
// election, the webhook with its self-issued certificate), then the same
// workload, its leader deleted.
func TestKustomizeInstallOnARealCluster(t *testing.T) {
	needCluster(t)
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"delete", "namespace", appNS, "--ignore-not-found", "--wait", "--timeout=90s"},
			{"delete", "-k", "config/default", "--ignore-not-found", "--wait", "--timeout=90s"},
		} {
			if out, err := kubectl.Run(context.Background(), "", args...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		}
	})
	start := time.Now()
	mustKubectl(t, "", "apply", "--server-side", "-k", "config/default")
	mustKubectl(t, "", "-n", "redislock-system", "rollout", "status", "deployment/redislock-controller", "--timeout", rolloutTimeout.String())
	t.Logf("kubectl apply -k config/default: Available in %.1fs", time.Since(start).Seconds())
	logAvailability(t, "redislock-system", "redislock-controller")
	webhookAnswersAtOnce(t)

	deployAndElect(t, nil)
	sidecarsRun(t, "redislock-system", "redislock-controller")
	leaderAnswersAgree(t)

	start = deleteTheLeaderPod(t)
	leaderAnswersAgree(t)
	t.Logf("3 Ready again %.1fs after the delete", time.Since(start).Seconds())
}
