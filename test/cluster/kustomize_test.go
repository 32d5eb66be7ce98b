package cluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	start = time.Now()
	deployWorkload(t)
	sampler := startSampler(appNS, "app="+app)
	defer sampler.check(t)
	waitForOneLeader(t, 3, "")
	t.Logf("Deployment of 3: all Ready with one leader %.1fs after kubectl apply", time.Since(start).Seconds())
	sidecarsRun(t, "redislock-system", "redislock-controller")
	leaderAnswersAgree(t)

	ps, _ := mustPods(t)
	old, _ := leaders(ps)
	start = time.Now()
	if err := client.CoreV1().Pods(appNS).Delete(context.Background(), old[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitForOneLeader(t, 0, old[0].Name)
	t.Logf("leader pod %s deleted: new leader labelled after %.2fs", old[0].Name, d.Seconds())
	waitForOneLeader(t, 3, "")
	leaderAnswersAgree(t)
	t.Logf("3 Ready again %.1fs after the delete", time.Since(start).Seconds())
}
