package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pythonWorkerEdits are what docs/workloads.md tells a user to change in
// examples/python-worker before applying it: the Redis address and the
// image (here the cluster's Redis, and the host's python3 in an image
// hack/cluster imported, as no registry can be reached).
func pythonWorkerEdits() map[string]string {
	return map[string]string{
		`"redis.redis.svc:6379"`: `"` + cluster.RedisAddr + `"`,
		"python:3.13-slim":       cluster.PythonImage,
	}
}

const (
	pythonNS  = "jobs"
	pythonApp = "app=python-worker"
)

// pythonWorker applies examples/python-worker as docs/workloads.md says
// (kubectl apply -k, with its edits), and checks that one pod leads and
// the worker runs there only; then that it moves with the leadership when
// the leader pod is deleted.
func pythonWorker(t *testing.T) {
	src := filepath.Join(repoRoot, "examples", "python-worker")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for from, to := range pythonWorkerEdits() {
			if strings.Contains(text, from) {
				found[from] = true
				text = strings.ReplaceAll(text, from, to)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for from := range pythonWorkerEdits() {
		if !found[from] {
			t.Fatalf("examples/python-worker no longer holds %s, which docs/workloads.md says to edit", from)
		}
	}
	t.Cleanup(func() {
		if out, err := kubectl.Run(context.Background(), "", "delete", "namespace", pythonNS, "--ignore-not-found", "--wait", "--timeout=90s"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
	// The command README.md and docs/workloads.md give, on the edited copy.
	want := []string{"kubectl", "apply", "-k", "examples/python-worker"}
	for _, doc := range []string{"README.md", "docs/workloads.md"} {
		docCommand(t, doc, "python-worker-apply", want)
	}
	mustKubectl(t, "", "apply", "-k", dir)
	first := waitForWorker(t, "")
	t.Logf("python-worker: %s leads and runs the worker; the other pod does not", first)
	if err := client.CoreV1().Pods(pythonNS).Delete(context.Background(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := waitForWorker(t, first)
	t.Logf("python-worker: after deleting %s, %s leads and runs the worker", first, next)
}

// waitForWorker waits until one pod but not, the one deleted, is labelled
// leader, the worker has ticked there, and it has never run on another
// pod; it returns the leader's name.
func waitForWorker(t *testing.T, not string) string {
	t.Helper()
	var leader string
	waitFor(t, rolloutTimeout, "one python-worker pod leading and running the worker, on it alone", func(ctx context.Context) (bool, string) {
		ps, err := pods(ctx, pythonNS, pythonApp)
		if err != nil {
			return false, err.Error()
		}
		ls, all := leaders(ps)
		if len(ls) != 1 || ls[0].Name == not {
			return false, "leaders: " + all
		}
		leader = ls[0].Name
		var ran []string
		for _, p := range ps {
			if p.Name == not || p.Status.Phase != corev1.PodRunning {
				continue
			}
			logs, err := client.CoreV1().Pods(pythonNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "worker"}).DoRaw(ctx)
			if err != nil {
				return false, fmt.Sprintf("logs of %s: %v", p.Name, err)
			}
			if strings.Contains(string(logs), "worker: tick") {
				ran = append(ran, p.Name)
			}
			if p.Name == leader && !strings.Contains(string(logs), "worker: tick 2 on "+leader) {
				return false, "the leader " + leader + " has not ticked twice yet:\n" + string(logs)
			}
		}
		if len(ran) != 1 || ran[0] != leader {
			t.Fatalf("the worker ran on %v; want on the leader %s only (%s)", ran, leader, all)
		}
		return true, ""
	})
	return leader
}
