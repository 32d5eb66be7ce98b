// Package e2e checks redislock the way its users meet it, against one real
// kube-apiserver and etcd (envtest, started by TestMain with the generated
// CRDs) and real redis-server processes, running the built binaries:
//   - the API: the samples apply, testdata/invalid is refused with a
//     readable message, printer columns and explain (kubectl_test.go,
//     crd_test.go);
//   - the controller, the agent, the webhook and the plugin end to end,
//     with exactly the RBAC the docs grant, through faults, outages and
//     failovers (controller_, agent_, agent_policy_, agent_required_,
//     webhook_, outage_, failover_, longpoll_, runcmd_,
//     operator_example_test.go);
//   - tenants and hostile servers: the admission policies, per-namespace
//     Redis users, what a tenant or her server can cost (tenancy_,
//     tenantusers_, scope_, hostile_bench_test.go);
//   - the chart, kustomize and the Dockerfile, rendered and installed
//     (chart_*, install_, rbac_, dockerfile_, dashboard_test.go);
//   - the chaos run and its checker (chaos_*, checker_test.go) and the
//     cost and benchmark runs that make bench collects (*_bench_test.go,
//     cost_test.go).
package e2e

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/internal/testing/testenv"
)

var (
	// repoRoot is the repository's root directory.
	repoRoot string
	// kubectlAdmin is kubectl as the admin (kubeconfigPath), run in the
	// repository root.
	kubectlAdmin testenv.Kubectl
	// kubeconfigPath is a kubeconfig for an admin of the envtest API server.
	kubeconfigPath string
	// nsCounter makes namespace names unique.
	nsCounter atomic.Int64
	// testEnv is the running envtest, for tests that add users.
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	repoRoot = root
	// The unit rung starts no API server: the static checks run, and the
	// tests that need one skip (apiServer).
	if !rung.Servers() {
		os.Exit(m.Run())
	}
	// envtest logs through controller-runtime's logger; what matters of
	// a control plane that fails to start is in the error it returns.
	logf.SetLogger(logr.Discard())
	useExisting := false
	env := &envtest.Environment{
		UseExistingCluster:       &useExisting,
		ControlPlaneStartTimeout: testenv.ControlPlaneStartTimeout,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// The API server's identity Lease (and the peer proxy, which needs it)
	// serve control planes of several API servers; off, this one makes no
	// requests of its own on Leases, so that the requests that
	// TestSteadyStateBenchmark counts there are the election's alone.
	env.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false")
	testenv.Main(root, env, true, func(*rest.Config) (int, error) { return run(m, env) })
}

// apiServer returns the API server's config for an admin, and skips t in
// the unit rung, which starts none. Every helper that talks to the API
// server or names its kubeconfig calls it.
func apiServer(t testing.TB) *rest.Config {
	t.Helper()
	rung.NeedServers(t)
	return testEnv.Config
}

// adminKubeconfig is the path of the admin's kubeconfig, as apiServer.
func adminKubeconfig(t testing.TB) string {
	t.Helper()
	rung.NeedServers(t)
	return kubeconfigPath
}

// run runs the tests against the started env.
func run(m *testing.M, env *envtest.Environment) (int, error) {
	dir, err := os.MkdirTemp("", "redislock-e2e-")
	if err != nil {
		return 0, fmt.Errorf("e2e: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if kubectlAdmin, err = testenv.AdminKubectl(env, "e2e-admin", dir, repoRoot); err != nil {
		return 0, fmt.Errorf("e2e: %w", err)
	}
	kubeconfigPath = kubectlAdmin.Kubeconfig
	testEnv = env
	return m.Run(), nil
}

// kubectl runs kubectl with args and returns its combined output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return kubectlIn(t, "", args...)
}

// kubectlIn runs kubectl with args and stdin, and returns its combined
// output.
func kubectlIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	rung.NeedServers(t)
	return kubectlAdmin.Run(context.Background(), stdin, args...)
}

// mustKubectl runs kubectl and fails the test if it fails.
func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// newNamespace creates a namespace of its own for t.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	prefix := fmt.Sprintf("e2e-%d-", nsCounter.Add(1))
	if len(prefix)+len(name) > 63 {
		name = strings.TrimRight(name[:63-len(prefix)], "-")
	}
	ns := prefix + name
	mustKubectl(t, "create", "namespace", ns)
	// envtest runs no namespace controller: without this, the RedisLocks
	// would outlive the test and every later controller would reconcile
	// them, dialling whatever hosts they name (cluster names, in the
	// validation tests). Finalizers go first, so that nothing waits.
	t.Cleanup(func() {
		names, err := kubectl(t, "get", "redislocks", "-n", ns, "-o", "name")
		if err != nil {
			t.Errorf("list the RedisLocks of %s: %v: %s", ns, err, names)
			return
		}
		for _, n := range strings.Fields(names) {
			if out, err := kubectl(t, "patch", "-n", ns, n, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil && !strings.Contains(out, "NotFound") {
				t.Errorf("drop the finalizers of %s: %v: %s", n, err, out)
			}
		}
		if out, err := kubectl(t, "delete", "redislocks", "--all", "-n", ns, "--wait=false"); err != nil {
			t.Errorf("delete the RedisLocks of %s: %v: %s", ns, err, out)
		}
	})
	return ns
}

// samplesDir is config/samples.
func samplesDir() string { return filepath.Join(repoRoot, "config", "samples") }

// sampleFiles lists config/samples/*.yaml but kustomization.yaml.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	if len(files) == 0 {
		t.Fatalf("no samples in %s", samplesDir())
	}
	return files
}

// sampleLock is what one sample file must create.
type sampleLock struct {
	name, mode, ttl string
}

// sampleLocks are the RedisLocks each sample declares, by file name.
var sampleLocks = map[string]sampleLock{
	"redislock_standalone.yaml": {"orders-leader", "Standalone", "15s"},
	"redislock_redlock.yaml":    {"billing-leader", "Redlock", "30s"},
	"redislock_sentinel.yaml":   {"scheduler-leader", "Sentinel", "15s"},
	"redislock_cluster.yaml":    {"reports-leader", "Cluster", "20s"},
	"redislock_tls.yaml":        {"payments-leader", "Standalone", "15s"},
}

// wideColumns are the columns `kubectl get redislocks -o wide` must print.
var wideColumns = []string{"NAME", "HOLDER", "MODE", "TTL", "RENEWINTERVAL", "RENEWDEADLINE", "TRANSITIONS", "READY", "AGE"}

// getWide runs `kubectl get redislocks -o wide` in ns, checks its header and
// returns its rows by name, each split into its columns' values.
func getWide(t *testing.T, ns string) map[string]map[string]string {
	t.Helper()
	out := mustKubectl(t, "get", "redislocks", "-o", "wide", "-n", ns)
	t.Logf("kubectl get redislocks -o wide -n %s:\n%s", ns, out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := strings.Fields(lines[0])
	for _, col := range wideColumns {
		if !slices.Contains(header, col) {
			t.Fatalf("kubectl get redislocks -o wide: header %q lacks column %s\n%s", lines[0], col, out)
		}
	}
	// Columns are aligned; cut each row at the header's column starts, since
	// an empty HOLDER leaves a blank.
	var starts []int
	for _, col := range header {
		starts = append(starts, regexp.MustCompile(`(^|\s)` + col + `(\s|$)`).FindStringIndex(lines[0])[0])
	}
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, col := range header {
			from, to := starts[i], len(line)
			if i+1 < len(starts) {
				to = min(starts[i+1], len(line))
			}
			if from < len(line) {
				row[col] = strings.TrimSpace(line[from:to])
			}
		}
		rows[row["NAME"]] = row
	}
	return rows
}

// secretRefs returns the Secret references, "name/key", of RedisLock name.
func secretRefs(t *testing.T, ns, name string) []string {
	t.Helper()
	var lock struct {
		Spec struct {
			Redis struct {
				Username *struct{ Name, Key string } `json:"usernameSecretRef"`
				Password *struct{ Name, Key string } `json:"passwordSecretRef"`
				TLS      *struct {
					CA *struct{ Name, Key string } `json:"caSecretRef"`
				} `json:"tls"`
			} `json:"redis"`
		} `json:"spec"`
	}
	out := mustKubectl(t, "get", "redislock", name, "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &lock); err != nil {
		t.Fatalf("decoding redislock %s: %v\n%s", name, err, out)
	}
	var refs []string
	r := lock.Spec.Redis
	for _, ref := range []*struct{ Name, Key string }{r.Username, r.Password} {
		if ref != nil {
			refs = append(refs, ref.Name+"/"+ref.Key)
		}
	}
	if r.TLS != nil && r.TLS.CA != nil {
		refs = append(refs, r.TLS.CA.Name+"/"+r.TLS.CA.Key)
	}
	return refs
}

// secretValue returns the decoded value of key in Secret name.
func secretValue(t *testing.T, ns, name, key string) []byte {
	t.Helper()
	var secret struct {
		Data map[string]string `json:"data"`
	}
	out := mustKubectl(t, "get", "secret", name, "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &secret); err != nil {
		t.Fatalf("decoding secret %s: %v\n%s", name, err, out)
	}
	enc, ok := secret.Data[key]
	if !ok {
		t.Fatalf("secret %s has no key %q (keys: %v)", name, key, keys(secret.Data))
	}
	val, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("secret %s key %s: %v", name, key, err)
	}
	return val
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestSamplesApply(t *testing.T) {
	files := sampleFiles(t)
	var covered []string
	for _, file := range files {
		base := filepath.Base(file)
		want, ok := sampleLocks[base]
		if !ok {
			t.Errorf("sample %s is not in sampleLocks: add what it declares", base)
			continue
		}
		covered = append(covered, base)
		t.Run(strings.TrimSuffix(base, ".yaml"), func(t *testing.T) {
			ns := newNamespace(t)
			out := mustKubectl(t, "apply", "-n", ns, "-f", file)
			if !strings.Contains(out, "redislock.redislock.io/"+want.name+" created") {
				t.Errorf("kubectl apply -f %s did not create redislock %s:\n%s", base, want.name, out)
			}

			rows := getWide(t, ns)
			row, ok := rows[want.name]
			if !ok {
				t.Fatalf("kubectl get redislocks -o wide in %s lists no %s: %v", ns, want.name, rows)
			}
			if len(rows) != 1 {
				t.Errorf("%s declares %d RedisLocks, want 1: %v", base, len(rows), rows)
			}
			if row["MODE"] != want.mode || row["TTL"] != want.ttl {
				t.Errorf("%s: MODE %q TTL %q, want %q %q (row %v)", want.name, row["MODE"], row["TTL"], want.mode, want.ttl, row)
			}

			// Every Secret the lock names is in the same file, with that key.
			for _, ref := range secretRefs(t, ns, want.name) {
				name, key, _ := strings.Cut(ref, "/")
				if val := secretValue(t, ns, name, key); len(val) == 0 {
					t.Errorf("secret %s key %s is empty", name, key)
				}
			}

			// A second apply of an unchanged sample changes nothing.
			out = mustKubectl(t, "apply", "-n", ns, "-f", file)
			if !strings.Contains(out, "redislock.redislock.io/"+want.name+" unchanged") {
				t.Errorf("re-applying %s changed the RedisLock:\n%s", base, out)
			}
		})
	}
	for base := range sampleLocks {
		if !slices.Contains(covered, base) {
			t.Errorf("config/samples/%s is missing", base)
		}
	}

	t.Run("kustomization", func(t *testing.T) {
		ns := newNamespace(t)
		out := mustKubectl(t, "apply", "-n", ns, "-k", samplesDir())
		rows := getWide(t, ns)
		for base, want := range sampleLocks {
			if _, ok := rows[want.name]; !ok {
				t.Errorf("kubectl apply -k config/samples did not create %s from %s:\n%s", want.name, base, out)
			}
		}
		if len(rows) != len(sampleLocks) {
			t.Errorf("kubectl apply -k config/samples made %d RedisLocks, want %d:\n%s", len(rows), len(sampleLocks), out)
		}
	})
}

func TestSampleTLSCAIsAPEMCertificate(t *testing.T) {
	ns := newNamespace(t)
	mustKubectl(t, "apply", "-n", ns, "-f", filepath.Join(samplesDir(), "redislock_tls.yaml"))
	refs := secretRefs(t, ns, sampleLocks["redislock_tls.yaml"].name)
	if len(refs) != 1 {
		t.Fatalf("the TLS sample names secrets %v, want only its CA", refs)
	}
	name, key, _ := strings.Cut(refs[0], "/")
	bundle := secretValue(t, ns, name, key)
	block, rest := pem.Decode(bundle)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("secret %s key %s is no PEM certificate:\n%s", name, key, bundle)
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		t.Errorf("secret %s key %s has trailing data after the certificate: %q", name, key, rest)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("secret %s key %s: %v", name, key, err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		t.Errorf("the certificate in secret %s is not a CA (IsCA %v)", name, cert.IsCA)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("the CA in secret %s is not self-signed: %v", name, err)
	}
	if time.Now().After(cert.NotAfter) {
		t.Errorf("the CA in secret %s expired on %v", name, cert.NotAfter)
	}
}

func TestSamplesGetDefaults(t *testing.T) {
	ns := newNamespace(t)
	file := filepath.Join(samplesDir(), "redislock_standalone.yaml")
	name := sampleLocks["redislock_standalone.yaml"].name
	mustKubectl(t, "apply", "-n", ns, "-f", file)
	out := mustKubectl(t, "get", "redislock", name, "-n", ns, "-o", "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("decoding kubectl get -o json: %v\n%s", err, out)
	}

	tests := []struct {
		path string
		want any
	}{
		{"spec.ttl", "15s"},
		// No fixed renew timing: unset, both are derived from ttl (2/15
		// and 2/3 of it), so that a short ttl alone is a valid spec.
		{"spec.renewInterval", nil},
		{"spec.renewDeadline", nil},
		{"spec.deletionPolicy", "Retain"},
		{"spec.redis.mode", "Standalone"},
		{"spec.redis.nodeTimeout", "200ms"},
		{"spec.redis.db", float64(0)},
		// What the sample sets is kept as written.
		{"spec.redis.addrs", []any{"redis.redis.svc:6379"}},
		{"spec.redis.passwordSecretRef.name", "redis-auth"},
		// No default invents a lock name: it falls back to the object's name
		// in the controller.
		{"spec.lockName", nil},
		{"metadata.namespace", ns},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, found := lookup(obj, tt.path)
			if tt.want == nil {
				if found {
					t.Errorf("%s = %#v, want it unset", tt.path, got)
				}
				return
			}
			if !found {
				t.Fatalf("%s is unset, want %#v; object:\n%s", tt.path, tt.want, out)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.path, got, tt.want)
			}
		})
	}
}

// lookup returns the value at the dotted path in obj.
func lookup(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// wantLine is the first line of every invalid manifest.
var wantLine = regexp.MustCompile(`^# want: (.+)$`)

func TestInvalidManifestsRejected(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in testdata/invalid")
	}
	ns := newNamespace(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			t.Parallel()
			want, err := readWant(file)
			if err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := kubectl(t, "apply", "-n", ns, "-f", abs)
			var exit *exec.ExitError
			if err == nil {
				t.Fatalf("kubectl apply accepted %s:\n%s", file, out)
			}
			if !errors.As(err, &exit) {
				t.Fatalf("kubectl apply -f %s did not run: %v\n%s", file, err, out)
			}
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply -f %s failed without %q; it said:\n%s", file, want, out)
			} else {
				t.Logf("kubectl apply -f %s: %s", file, strings.TrimSpace(out))
			}
			if !strings.Contains(out, "is invalid") {
				t.Errorf("kubectl apply -f %s failed for some reason other than validation:\n%s", file, out)
			}
		})
	}
	// Nothing invalid was stored.
	t.Cleanup(func() {
		if out := mustKubectl(t, "get", "redislocks", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("invalid manifests were stored:\n%s", out)
		}
	})
}

// readWant returns the substring named on file's first line, "# want: ...".
func readWant(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return "", fmt.Errorf("%s is empty", file)
	}
	m := wantLine.FindStringSubmatch(sc.Text())
	if m == nil {
		return "", fmt.Errorf("%s does not start with \"# want: <substring of the error>\": %q", file, sc.Text())
	}
	return strings.TrimSpace(m[1]), nil
}

func TestExplainDocumentsFields(t *testing.T) {
	tests := []struct {
		field string
		// want is a phrase of the field's description.
		want string
	}{
		{"redislocks.spec.redis.addrs", "host:port addresses"},
		{"redislocks.spec.ttl", "how long the lock lives"},
		{"redislocks.status.holderIdentity", "names the current holder"},
		{"redislocks.spec.redis.mode", "Standalone"},
		{"rl.spec.deletionPolicy", "Retain"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			out := explain(t, tt.field)
			desc := description(out)
			if desc == "" {
				t.Fatalf("kubectl explain %s printed no DESCRIPTION:\n%s", tt.field, out)
			}
			t.Logf("kubectl explain %s: DESCRIPTION: %s", tt.field, desc)
			if !strings.Contains(strings.Join(strings.Fields(desc), " "), tt.want) {
				t.Errorf("kubectl explain %s: DESCRIPTION lacks %q:\n%s", tt.field, tt.want, out)
			}
		})
	}
}

// explain runs kubectl explain on field. The API server publishes a new
// CRD's OpenAPI a moment after it is established, so "not found" is retried
// for a while.
func explain(t *testing.T, field string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := kubectl(t, "explain", field)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) || !strings.Contains(strings.ToLower(out), "couldn't find resource") {
			t.Fatalf("kubectl explain %s: %v\n%s", field, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// description returns the DESCRIPTION section of kubectl explain's output.
func description(out string) string {
	_, after, ok := strings.Cut(out, "DESCRIPTION:")
	if !ok {
		return ""
	}
	// The section ends at the next heading, a line starting with a capital
	// word and a colon (FIELDS:, ENUM:, ...).
	var lines []string
	for _, line := range strings.Split(after, "\n") {
		if len(line) > 0 && line[0] != ' ' && line[0] != '\t' && strings.HasSuffix(strings.TrimSpace(line), ":") {
			break
		}
		lines = append(lines, line)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
