package e2e

import (
	"strings"
	"testing"
	"time"
)

// The chart's admission policy redislock-agent-required, run by the API
// server itself: with failurePolicy Fail, a pod annotated redislock.io/lock
// that comes out of admission without the agent (the webhook was down, or
// the pod is outside its selectors) is refused with the reason; a pod with
// the agent, one without the annotation and one in the release's namespace
// are admitted. With Ignore the same pod is admitted with a warning.
func TestChartRefusesAnnotatedPodsWithoutTheAgent(t *testing.T) {
	release, ns := newNamespace(t), newNamespace(t)
	apply := func(set ...string) string {
		t.Helper()
		objs := render(t, chartDir(), append([]string{"-n", release, "--set", "watchNamespaces={shop}"}, set...)...)
		var policy []string
		for _, o := range objs {
			if k := o["kind"]; k == "ValidatingAdmissionPolicy" || k == "ValidatingAdmissionPolicyBinding" {
				if name := o["metadata"].(map[string]any)["name"].(string); strings.HasSuffix(name, "-agent-required") {
					policy = append(policy, asYAML(o))
				}
			}
		}
		if len(policy) != 2 {
			t.Fatalf("the chart renders %d agent-required policy objects, want the policy and its binding", len(policy))
		}
		manifest := strings.Join(policy, "\n---\n")
		if out, err := kubectlIn(t, manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return manifest
	}
	pod := func(namespace string, annotated, withAgent bool) string {
		p := "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: p-\n  namespace: " + namespace + "\n"
		if annotated {
			p += "  annotations: {redislock.io/lock: worker}\n"
		}
		p += "spec:\n  containers: [{name: app, image: example.test/app:1}]\n"
		if withAgent {
			p += "  initContainers: [{name: redislock-agent, image: example.test/redislock:1, restartPolicy: Always}]\n"
		}
		return p
	}
	create := func(p string) (string, error) {
		return kubectlIn(t, p, "create", "--dry-run=server", "-f", "-")
	}

	manifest := apply()
	t.Cleanup(func() {
		_, _ = kubectlIn(t, manifest, "delete", "--ignore-not-found", "-f", "-")
		// The API server stops enforcing it a moment later: wait, so that
		// no later test meets it.
		waitUntil(t, 30*time.Second, "the policy to be gone", func() bool {
			out, err := create(pod(ns, true, false))
			return err == nil && !strings.Contains(out, "Warning")
		})
	})
	var out string
	t.Cleanup(func() {
		if t.Failed() {
			st, _ := kubectl(t, "get", "validatingadmissionpolicy", "rl-redislock-agent-required", "-o", "yaml")
			t.Logf("the policy:\n%s\nthe last answer:\n%s", st, out)
		}
	})
	waitUntil(t, 30*time.Second, "the API server to enforce the policy", func() bool {
		var err error
		out, err = create(pod(ns, true, false))
		return err != nil
	})
	for _, want := range []string{"pod annotated redislock.io/lock: worker has no redislock-agent container", "the injection webhook of the Deployment " + release + "/rl-redislock-controller did not run", "injects in shop only"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal of an annotated pod without the agent does not say %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		what string
		pod  string
	}{
		{"an annotated pod with the agent", pod(ns, true, true)},
		{"a pod without the annotation", pod(ns, false, false)},
		{"an annotated pod in the release's namespace", pod(release, true, false)},
	} {
		if out, err := create(tc.pod); err != nil {
			t.Errorf("%s was refused: %v\n%s", tc.what, err, out)
		}
	}

	manifest = apply("--set", "webhook.failurePolicy=Ignore")
	waitUntil(t, 30*time.Second, "the annotated pod without the agent admitted with a warning", func() bool {
		out, err := create(pod(ns, true, false))
		return err == nil && strings.Contains(out, "Warning") && strings.Contains(out, "has no redislock-agent container")
	})
}
