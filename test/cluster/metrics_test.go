package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scrapeScript GETs the URL in argv[1] with the pod's service account
// token and without one, and prints each answer's status (and whether the body
// is Prometheus metrics). The certificate is self-signed.
const scrapeScript = `
import ssl, sys, urllib.request, urllib.error
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
for name, headers in (("with-token", {"Authorization": "Bearer " + token}), ("without-token", {})):
    try:
        r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers=headers), context=ctx, timeout=20)
        body = r.read().decode()
        print(name, r.status, "go_goroutines" in body)
    except urllib.error.HTTPError as e:
        print(name, e.code, False)
`

// metricsNeedAToken scrapes the controller's metrics Service from a pod, as
// Prometheus would with metrics.secure (the chart's default): over HTTPS,
// with a service account bound to <fullname>-metrics-reader it gets them;
// without a token it is refused.
func metricsNeedAToken(t *testing.T) {
	const ns, sa, binding = "monitoring", "prometheus", "prometheus-redislock-metrics"
	reader := release + "-redislock-metrics-reader"
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout=90s"},
			{"delete", "clusterrolebinding", binding, "--ignore-not-found"},
		} {
			if out, err := kubectl.Run(context.Background(), "", args...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		}
	})
	svc, err := client.CoreV1().Services(releaseNS).Get(context.Background(), release+"-redislock-metrics", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, "", "-n", ns, "create", "serviceaccount", sa)
	// The binding docs/metrics.md gives, for this test's release.
	docCommand(t, "docs/metrics.md", "metrics-reader-binding",
		[]string{"kubectl", "create", "clusterrolebinding", binding, "--clusterrole=redislock-metrics-reader", "--serviceaccount=" + ns + ":" + sa})
	mustKubectl(t, "", "create", "clusterrolebinding", binding, "--clusterrole="+reader, "--serviceaccount="+ns+":"+sa)
	waitFor(t, leaderTimeout, "the namespace's service account", func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scrape", Namespace: ns},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "scrape", Image: cluster.PythonImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"python3", "-c", scrapeScript, url},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rolloutTimeout, "the scrape pod done", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed {
			logs, _ := client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("the scrape pod failed:\n%s", logs)
		}
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase)
	})
	logs, err := client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"with-token 200 True", "without-token 401 False"} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("GET %s from a pod: want %q in\n%s", url, want, logs)
		}
	}
	t.Logf("GET %s from a pod: %s", url, strings.ReplaceAll(strings.TrimSpace(string(logs)), "\n", "; "))
}
