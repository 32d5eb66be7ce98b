package e2e

import (
	"bufio"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// The Grafana dashboard the chart ships names only metrics that exist: a
// controller and three agents run on a RedisLock, the leader hands over
// (SIGTERM), and every redislock_ series that a dashboard query names is
// one that their /metrics serve. The chart's ConfigMap holds the file as it
// is.
func TestDashboardNamesOnlyServedMetrics(t *testing.T) {
	file := filepath.Join(chartDir(), "files", "dashboard.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	named := map[string]string{} // metric -> the panel that names it
	metric := regexp.MustCompile(`\bredislock_[a-z_]+\b`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range metric.FindAllString(q.Expr, -1) {
				named[m] = p.Title
			}
		}
	}
	if len(named) < 8 {
		t.Fatalf("the dashboard names %d redislock metrics, want the controller's and the agents' (8 or more): %v", len(named), named)
	}

	cm := object(t, render(t, chartDir(), "--set", "metrics.dashboard.enabled=true"), "ConfigMap")
	if l := cm["metadata"].(map[string]any)["labels"].(map[string]any); l["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard=1", l)
	}
	if got := cm["data"].(map[string]any)["redislock.json"]; got != strings.TrimSpace(string(raw)) {
		t.Errorf("the ConfigMap's redislock.json is not %s", file)
	}

	s := redistest.Start(t, redisproc.Options{Password: "dash-pass"})
	metrics, pprof := freeAddr(t), freeAddr(t)
	startController(t, nil, "-metrics-bind-address="+metrics, "-pprof-bind-address="+pprof)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "worker", s, "dash-pass", faultTiming)
	fl, ids, p := startAgents(t, ns, "worker", agentUser(t, ns))
	leader := p.waitLeader(t, "", 3*faultTiming.lease+5*time.Second)
	fl.signal(leader, syscall.SIGTERM)
	if err := fl.waitExit(leader, 10*time.Second); err != nil {
		t.Fatalf("%s after SIGTERM: %v", leader, err)
	}
	next := p.waitLeader(t, leader, 10*time.Second)
	p.stop()

	served := func(addr string) sets.Set[string] {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil
		}
		defer func() { _ = resp.Body.Close() }()
		names := sets.New[string]()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "redislock_") {
				names.Insert(metric.FindString(line))
			}
		}
		return names
	}
	var all sets.Set[string]
	waitUntil(t, 30*time.Second, "every metric the dashboard names, served by the controller or an agent", func() bool {
		all = served(metrics)
		for _, id := range ids {
			if id != leader {
				all = all.Union(served(fl.proc(id).addr))
			}
		}
		for m := range named {
			if !all.Has(m) {
				return false
			}
		}
		return true
	})
	for m, panel := range named {
		if !all.Has(m) {
			t.Errorf("panel %q names %s, which neither the controller nor an agent serves (after %s handed over to %s)", panel, m, leader, next)
		}
	}
	t.Logf("the dashboard names %d metrics, all served: %v", len(named), slices.Sorted(maps.Keys(named)))
	// The profiles docs/install.md points an operator to, beside the
	// metrics.
	heapProfile(t, pprof)
}
