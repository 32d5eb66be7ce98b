package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redislock"
)

// The example operator: a stock kubebuilder v4 scaffold whose files
// differ from the pristine copies beside it (scaffoldChanges) by the diff
// that docs/operators.md shows.
const (
	operatorDir     = "examples/operator"
	operatorDoc     = "docs/operators.md"
	operatorHeading = "## The diff against a stock kubebuilder scaffold"
)

// TestOperatorExample builds examples/operator and checks what
// docs/operators.md says of it: the diff on that page is the diff between
// the stock scaffold's cmd/main.go and the example's; the RBAC YAML is what
// controller-gen makes of the markers in its main.go; with --leader-elect=false
// it runs (serves /healthz) with no Redis; and with the Deployment's args,
// as the service account of its kustomize RBAC, two replicas elect one
// leader on a RedisLock, and the other takes over when the leader is
// killed.
func TestOperatorExample(t *testing.T) {
	dir := filepath.Join(repoRoot, operatorDir)
	bin := buildExample(t, dir)

	t.Run("the diff in docs/operators.md is the tree's", func(t *testing.T) {
		want := scaffoldDiff(t)
		got := docDiff(t)
		if got != want {
			t.Errorf("the ```diff block under %q in %s is not the diff of the stock scaffold's files against %s's; put this there:\n%s",
				operatorHeading, operatorDoc, operatorDir, want)
		}
		patchApplies(t, got)
	})

	t.Run("config/rbac/role.yaml is what controller-gen makes of the markers", func(t *testing.T) {
		roleIsGenerated(t, dir)
	})

	t.Run("the Permissions YAML in docs/operators.md grants what the example's role.yaml does", func(t *testing.T) {
		block, err := testenv.DocBlockByID(repoRoot, operatorDoc, "operator-rbac")
		if err != nil {
			t.Fatal(err)
		}
		role, err := os.ReadFile(filepath.Join(dir, "config", "rbac", "role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		got, want := ruleGrants(block.Text), ruleGrants(string(role))
		if !slices.Equal(got, want) {
			t.Errorf("%s block operator-rbac grants\n  %s\nthe example's config/rbac/role.yaml (which the election subtest runs under) grants\n  %s",
				operatorDoc, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})

	t.Run("with --leader-elect=false it runs without Redis", func(t *testing.T) {
		probe := freeAddr(t)
		var log lineLog
		p := startProc(t, 8192, proc.Options{Name: "operator", Path: bin,
			Args: []string{"--kubeconfig=" + adminKubeconfig(t), "--leader-elect=false",
				"--health-probe-bind-address=" + probe, "--metrics-bind-address=0"},
			Log: filepath.Join(t.TempDir(), "operator.log"), Stderr: log.add, Stdout: log.add})
		if err := p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) {
			return httpOK("http://" + probe + "/healthz"), nil
		}); err != nil {
			t.Fatal(err)
		}
		// It keeps serving, as a Pod's liveness probe would see: up and
		// healthy at every look for a while.
		stayUntil := time.Now().Add(3 * time.Second)
		for time.Now().Before(stayUntil) {
			if p.Exited() {
				t.Fatalf("the operator exited: %v", p.Wait(context.Background()))
			}
			if !httpOK("http://" + probe + "/healthz") {
				t.Fatalf("GET /healthz failed after it had answered")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if log.has("attempting to acquire leader lease") {
			t.Errorf("with --leader-elect=false the operator campaigned:\n%s", p.LogTail(4096))
		}
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("the operator after SIGTERM: %v", err)
		}
	})

	t.Run("two replicas on a RedisLock elect one and hand over", func(t *testing.T) {
		operatorElection(t, dir, bin)
	})
}

// buildExample builds the example operator in dir (its ./cmd, in its own
// module) into t's temporary directory and returns the binary's path.
func buildExample(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	build := exec.Command("go", "build", "-o", bin, "./cmd")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd in %s: %v\n%s", dir, err, out)
	}
	return bin
}

// roleIsGenerated fails t unless the example operator in dir has the
// config/rbac/role.yaml that controller-gen makes of its
// +kubebuilder:rbac markers.
func roleIsGenerated(t *testing.T, dir string) {
	t.Helper()
	cg, err := testenv.Tool(repoRoot, "CONTROLLER_GEN", filepath.Join("bin", "controller-gen-*"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	gen := exec.Command(cg, "rbac:roleName=manager-role", "paths=./...", "output:rbac:artifacts:config="+out)
	gen.Dir = dir
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen in %s: %v\n%s", dir, err, b)
	}
	want, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s/config/rbac/role.yaml is not what controller-gen makes of the +kubebuilder:rbac markers (make manifests); it makes:\n%s", dir, want)
	}
}

// scaffoldChanges are the files the example changes in the stock
// scaffold, by path in the example, with the pristine copy of each under
// examples/operator/testdata ("" for a file the change adds).
var scaffoldChanges = []struct{ path, pristine string }{
	{"cmd/main.go", "scaffold_main.go.txt"},
	{"config/manager/manager.yaml", "scaffold/config/manager/manager.yaml"},
	{"config/rbac/kustomization.yaml", "scaffold/config/rbac/kustomization.yaml"},
	{"config/rbac/role.yaml", "scaffold/config/rbac/role.yaml"},
	{"config/rbac/redislock_election_role_binding.yaml", ""},
}

// scaffoldDiff is `diff -u` of each of scaffoldChanges' pristine copy
// against the example's file, with a/ and b/ labels (/dev/null for an
// added file), one after the other.
func scaffoldDiff(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, f := range scaffoldChanges {
		from, label := "/dev/null", "/dev/null"
		if f.pristine != "" {
			from, label = filepath.Join(operatorDir, "testdata", f.pristine), "a/"+f.path
		}
		cmd := exec.Command("diff", "-u", "--label", label, "--label", "b/"+f.path, from, filepath.Join(operatorDir, f.path))
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 { // 1: they differ
			t.Fatalf("diff -u %s %s/%s: %v (want exit status 1: the files differ)\n%s", from, operatorDir, f.path, err, out)
		}
		all.Write(out)
	}
	return all.String()
}

// patchApplies applies diff with `patch -p1` to a copy of the pristine
// scaffold files and fails t unless it gives the example's files.
func patchApplies(t *testing.T, diff string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range scaffoldChanges {
		if f.pristine == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, operatorDir, "testdata", f.pristine))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f.path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("patch", "-p1")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch -p1 < the diff in %s, on the stock scaffold: %v\n%s", operatorDoc, err, out)
	}
	for _, f := range scaffoldChanges {
		got, err := os.ReadFile(filepath.Join(dir, f.path))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(repoRoot, operatorDir, f.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("patch -p1 of the diff in %s makes a %s other than the example's", operatorDoc, f.path)
		}
	}
}

// docDiff is the one ```diff block of docs/operators.md's section
// operatorHeading.
func docDiff(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, operatorDoc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	start := slices.Index(lines, operatorHeading)
	if start < 0 {
		t.Fatalf("%s has no heading %q", operatorDoc, operatorHeading)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}
	d, err := testenv.ReadDoc(repoRoot, operatorDoc)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, b := range d.Blocks {
		if b.Lang == "diff" && b.Line > start+1 && b.Line <= end {
			found = append(found, b.Text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d ```diff blocks under %q (lines %d-%d), want 1", operatorDoc, len(found), operatorHeading, start+1, end)
	}
	return found[0]
}

// operatorElection renders the example's kustomize config (config/default),
// applies its RBAC, declares the RedisLock its Deployment names on a new
// Redis, and runs two replicas with the Deployment's args as its service
// account: one leads (by its own leader_election_master_status metric, its
// log and the holder in Redis), the other does not, and when the leader is
// killed the other leads. Neither is refused a request.
func operatorElection(t *testing.T, dir, bin string) {
	rung.NeedServers(t)
	ns, sa, args := applyOperatorRBAC(t, dir, "redislock/operator-leader", "secret/redis-auth")
	lockNS, lockName, ok := strings.Cut(argValue(args, "--leader-election-redislock"), "/")
	if !slices.Contains(args, "--leader-elect") || !ok || lockNS != ns {
		t.Fatalf("the Deployment's manager args %q: want --leader-elect and --leader-election-redislock=<its namespace>/<name>", args)
	}

	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	createRedisLock(t, ns, lockName, s, "s3cret", d)
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	redisName := lockIn(t, ns) + "/" + lockName
	holder := func() string {
		h, err := lc.Inspect(context.Background(), redisName)
		if err != nil {
			return "error: " + err.Error()
		}
		return h.Identity
	}

	kubeconfig := kubeconfigAs(t, ns, sa)
	start := func(id string) *opReplica {
		r := &opReplica{id: id, probe: freeAddr(t), metrics: freeAddr(t)}
		r.p = startProc(t, 8192, proc.Options{Name: id, Path: bin,
			// The Deployment's args, then what only a test on one host
			// needs: the API server, and ports of its own (later flags win).
			Args: append(slices.Clone(args), "--kubeconfig="+kubeconfig,
				"--health-probe-bind-address="+r.probe, "--metrics-bind-address="+r.metrics, "--metrics-secure=false"),
			Env: []string{"POD_NAME=" + id}, // the identity; in a Pod, its hostname
			Log: filepath.Join(t.TempDir(), id+".log"), Stdout: r.log.add, Stderr: r.log.add})
		if err := r.p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) {
			return httpOK("http://" + r.probe + "/healthz"), nil
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	leads := func(r *opReplica) bool {
		return r.status() == 1 && r.log.has("successfully acquired lease") && holder() == r.id
	}

	a := start("operator-a")
	waitUntil(t, 30*time.Second, "operator-a leading (metric, log, holder in Redis)", func() bool { return leads(a) })
	b := start("operator-b")
	waitUntil(t, 30*time.Second, "operator-b campaigning", func() bool { return b.log.has("attempting to acquire leader lease") })
	// One leader: for two retry periods and more, each look finds a
	// leading, b not.
	for until := time.Now().Add(d.settle()); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		if st := b.status(); st != 0 || b.log.has("successfully acquired lease") {
			t.Fatalf("operator-b leads (leader_election_master_status %v) while operator-a does; holder in Redis %q", st, holder())
		}
		if !leads(a) {
			t.Fatalf("operator-a stopped leading (leader_election_master_status %v, holder in Redis %q) with no cause", a.status(), holder())
		}
	}

	killed := time.Now()
	if err := a.p.Kill(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, d.lease+3*d.retry+10*time.Second, "operator-b leading after operator-a was killed", func() bool { return leads(b) })
	t.Logf("operator-b leads %v after operator-a's SIGKILL (ttl %v)", time.Since(killed).Round(time.Millisecond), d.lease)
	waitUntil(t, 10*time.Second, "the event that operator-b became leader, on the RedisLock", func() bool {
		out, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+lockName, "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, "operator-b became leader")
	})
	for _, r := range []*opReplica{a, b} {
		if line := r.log.find("forbidden"); line != "" {
			t.Errorf("%s was refused a request by the example's RBAC: %s", r.id, line)
		}
	}
}

// applyOperatorRBAC renders the kustomize config/default of the example
// operator in dir, applies its Namespace, ServiceAccount and RBAC, and
// returns the ServiceAccount's namespace and name and the Deployment's
// manager args, $(POD_NAMESPACE) replaced. When t ends, it deletes the
// RBAC and the objects named in ns (kubectl's kind/name).
func applyOperatorRBAC(t *testing.T, dir string, objects ...string) (ns, sa string, args []string) {
	t.Helper()
	rendered, err := kubectlAdmin.Run(context.Background(), "", "kustomize", filepath.Join(dir, "config", "default"))
	if err != nil {
		t.Fatalf("%v\n%s", err, rendered)
	}
	var rbac []string
	for _, d := range docs(rendered) {
		kind, _ := d["kind"].(string)
		meta, _ := d["metadata"].(map[string]any)
		switch kind {
		case "Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			b, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			rbac = append(rbac, string(b))
			if kind == "ServiceAccount" {
				ns, sa = meta["namespace"].(string), meta["name"].(string)
			}
		case "Deployment":
			args = containerArgs(d, "manager")
		}
	}
	if ns == "" || args == nil {
		t.Fatalf("no ServiceAccount or no Deployment with a manager container in %s/config/default:\n%s", dir, rendered)
	}
	manifest := strings.Join(rbac, "---\n")
	if out, err := kubectlIn(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller: the namespace stays, its
		// objects go.
		_, _ = kubectl(t, append([]string{"delete", "-n", ns, "--ignore-not-found"}, objects...)...)
		_, _ = kubectlIn(t, strings.Join(slices.DeleteFunc(rbac, func(s string) bool { return strings.Contains(s, "kind: Namespace\n") }), "---\n"),
			"delete", "--ignore-not-found", "-f", "-")
	})
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$(POD_NAMESPACE)", ns)
	}
	return ns, sa, args
}

// argValue is the value of the last --name=value among args; "" if none.
func argValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if s, ok := strings.CutPrefix(a, name+"="); ok {
			v = s
		}
	}
	return v
}

// ruleGrants lists, sorted, each permission that the Roles and ClusterRoles in
// the YAML documents of s give, one "<kind> <group>/<resource>[/<name>] <verb>"
// a line, with namespaces and object names left out.
func ruleGrants(s string) []string {
	var out []string
	for _, d := range docs(s) {
		kind, _ := d["kind"].(string)
		if kind != "Role" && kind != "ClusterRole" {
			continue
		}
		rules, _ := d["rules"].([]any)
		for _, r := range rules {
			r, _ := r.(map[string]any)
			names := strs(r["resourceNames"])
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range strs(r["apiGroups"]) {
				for _, res := range strs(r["resources"]) {
					for _, n := range names {
						for _, v := range strs(r["verbs"]) {
							out = append(out, strings.TrimSuffix(kind+" "+g+"/"+res+"/"+n, "/")+" "+v)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// strs is a YAML list of strings.
func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// opReplica is one running copy of the example operator.
type opReplica struct {
	id             string
	probe, metrics string
	p              *proc.Process
	log            lineLog
}

// status is the replica's leader_election_master_status (1 leading, 0
// not), or -1 when it serves none.
func (r *opReplica) status() float64 {
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "leader_election_master_status{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// httpOK says whether GET url answers 200.
func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// lineLog keeps a process's output lines.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// find returns the first line holding s, in any case, or "".
func (l *lineLog) find(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
			return line
		}
	}
	return ""
}

func (l *lineLog) has(s string) bool { return l.find(s) != "" }
