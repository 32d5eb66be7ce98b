package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart's alerts fire when they should and not otherwise: promtool
// test rules runs testdata/alerts/alerts_test.yaml on the PrometheusRule
// the chart renders. The same series fail the test once an expression is
// broken, so the test can fail. The values land where they should.
func TestChartAlertsFireAsTested(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH: install Debian's prometheus package (make test does, as root: hack/ensure-packages.sh): %v", err)
	}
	spec := func(t *testing.T, values ...string) map[string]any {
		t.Helper()
		rule := object(t, render(t, chartDir(), append([]string{"--set", "metrics.prometheusRule.enabled=true"}, values...)...), "PrometheusRule")
		return rule["spec"].(map[string]any)
	}
	run := func(t *testing.T, spec map[string]any) (string, error) {
		t.Helper()
		dir := t.TempDir()
		rules, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		tests, err := os.ReadFile(filepath.Join(repoRoot, "test", "e2e", "testdata", "alerts", "alerts_test.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"rules.yaml": rules, "alerts_test.yaml": tests} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("promtool test rules passes", func(t *testing.T) {
		if out, err := run(t, spec(t)); err != nil {
			t.Fatalf("promtool test rules: %v\n%s", err, out)
		}
	})
	t.Run("a broken expression fails it", func(t *testing.T) {
		s := spec(t)
		broken := false
		for _, r := range s["groups"].([]any)[0].(map[string]any)["rules"].([]any) {
			if r := r.(map[string]any); r["alert"] == "RedisLockNotReady" {
				r["expr"] = strings.Replace(r["expr"].(string), "== 0", "== 1", 1)
				broken = true
			}
		}
		if !broken {
			t.Fatal("no RedisLockNotReady rule")
		}
		out, err := run(t, s)
		if err == nil || !strings.Contains(out, "RedisLockNotReady") {
			t.Fatalf("promtool passed the rules with RedisLockNotReady broken (%v):\n%s", err, out)
		}
	})
	t.Run("the values land", func(t *testing.T) {
		rule := object(t, render(t, chartDir(), "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom",
			"--set", "metrics.prometheusRule.noLeaderFor=7m", "--set", "metrics.prometheusRule.notReadyFor=8m",
			"--set", "metrics.prometheusRule.acquireErrorsFor=9m", "--set", "metrics.prometheusRule.controllerDownFor=11m",
			"--set", "metrics.prometheusRule.shardsUnownedFor=2m"), "PrometheusRule")
		if l := rule["metadata"].(map[string]any)["labels"].(map[string]any); l["release"] != "prom" {
			t.Errorf("labels %v, want release=prom among them", l)
		}
		want := map[string]string{"RedisLockNoHolder": "7m", "RedisLockNotReady": "8m", "RedisLockAcquireErrors": "9m", "RedisLockControllerDown": "11m", "RedisLockEvictionRisk": "15m", "RedisLockShardsUnowned": "2m"}
		for _, r := range rule["spec"].(map[string]any)["groups"].([]any)[0].(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			name := r["alert"].(string)
			if r["for"] != want[name] {
				t.Errorf("%s: for %v, want %s", name, r["for"], want[name])
			}
			delete(want, name)
		}
		if len(want) > 0 {
			t.Errorf("alerts not rendered: %v", want)
		}
		if objs := render(t, chartDir()); findKind(objs, "PrometheusRule") != nil {
			t.Error("a PrometheusRule rendered by default")
		}
	})
}
