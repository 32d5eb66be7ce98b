package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const crdDescription = "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}"

// charts/redislock-crds as docs/install.md installs it (over the CRDs the
// redislock chart's crds/ left, or none): helm upgrade to a copy whose
// RedisLock CRD has another description changes the live CRD, an upgrade
// back restores it, and helm uninstall leaves the CRDs (keep).
func TestCRDsChartUpgradesTheCRDs(t *testing.T) {
	needCluster(t)
	const crdsRelease = "redislock-crds"
	install := []string{"helm", "install", crdsRelease, "charts/redislock-crds", "--take-ownership"}
	docCommand(t, "docs/install.md", "crds-chart-install", install)
	mustHelm(t, installTimeout, install[1:]...)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			mustHelm(t, installTimeout, "uninstall", crdsRelease)
		}
	})
	before := mustKubectl(t, "", "get", "crd/redislocks.redislock.io", "-o", crdDescription)

	chart := filepath.Join(t.TempDir(), crdsRelease)
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(repoRoot, "charts", crdsRelease))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(chart, "files", "crds", "redislock.io_redislocks.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	const upgraded = "a RedisLock, as upgraded by test/cluster"
	crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["description"] = upgraded
	if b, err = yaml.Marshal(crd); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ chart, want string }{{chart, upgraded}, {filepath.Join(repoRoot, "charts", crdsRelease), before}} {
		start := time.Now()
		mustHelm(t, installTimeout, "upgrade", crdsRelease, c.chart, "--wait", "--timeout", installTimeout.String())
		if got := mustKubectl(t, "", "get", "crd/redislocks.redislock.io", "-o", crdDescription); got != c.want {
			t.Fatalf("after helm upgrade to %s the CRD's description is %q, want %q", c.chart, got, c.want)
		}
		t.Logf("helm upgrade %s to %s: %.1fs, and the RedisLock CRD has its description", crdsRelease, c.chart, time.Since(start).Seconds())
	}

	mustHelm(t, installTimeout, "uninstall", crdsRelease, "--wait")
	uninstalled = true
	for _, name := range []string{"redislocks", "redisconnections", "clusterredisconnections"} {
		if out, err := kubectl.Run(context.Background(), "", "get", "crd", name+".redislock.io", "-o", "name"); err != nil || !strings.Contains(out, name) {
			t.Errorf("after helm uninstall %s the CRD %s.redislock.io is gone (%v): keep should leave it\n%s", crdsRelease, name, err, out)
		}
	}
}
