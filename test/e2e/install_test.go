package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// chartDir is the Helm chart.
func chartDir() string { return filepath.Join(repoRoot, "charts", "redislock") }

// crdsChartDir is the chart of the CRDs alone, for helm upgrade to upgrade.
func crdsChartDir() string { return filepath.Join(repoRoot, "charts", "redislock-crds") }

// helm runs the pinned helm (hack/ensure-tools.sh builds it; $HELM
// overrides) and returns its stdout, and stderr on failure.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Tool(repoRoot, "HELM", filepath.Join("bin", "helm-*"))
	if err != nil {
		t.Fatal(err)
	}
	// helm template renders without an API server (the unit rung); the
	// other commands talk to the test's.
	kubeconfig := ""
	if len(args) > 0 && args[0] == "template" {
		// helm template assumes Kubernetes 1.20 unless told (a helm built
		// without its release flags), and the chart's kubeVersion asks for
		// more: render for the test API server's version.
		v, err := apiServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--kube-version", v)
	} else {
		kubeconfig = adminKubeconfig(t)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

var thirdPartyCRDs sync.Once

// apiServerVersion is the test API server's version, as v1.NN.P: in the
// unit rung, which starts none, that of its binaries (their directory's
// name, bin/k8s/v1.NN.P).
var apiServerVersion = sync.OnceValues(func() (string, error) {
	if testEnv == nil {
		dir, err := testenv.AssetsDir(repoRoot)
		return filepath.Base(dir), err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(testEnv.Config)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
})

// installThirdPartyCRDs installs the CRDs of the kinds the chart can render
// besides ours (cert-manager's Issuer and Certificate, Prometheus's
// ServiceMonitor, PodMonitor and PrometheusRule), generated from their pinned API packages, so the API
// server validates those objects against their real schemas.
func installThirdPartyCRDs(t *testing.T) {
	t.Helper()
	thirdPartyCRDs.Do(func() {
		dir, err := testenv.Tool(repoRoot, "THIRD_PARTY_CRDS", filepath.Join("bin", "crds", "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificates.yaml", "monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
			mustKubectl(t, "apply", "--server-side", "-f", filepath.Join(dir, f))
		}
		mustKubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
			"crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io", "crd/certificates.cert-manager.io", "crd/servicemonitors.monitoring.coreos.com", "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	})
}

func TestHelmLintIsClean(t *testing.T) {
	out, err := helm(t, "lint", "--strict", chartDir(), crdsChartDir())
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 chart(s) linted, 0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Fatalf("helm lint:\n%s", out)
	}
}

// The chart, rendered with its defaults and with every optional part on,
// is accepted object by object by the real API server (server-side apply,
// dry run): our CRD included, and cert-manager's and Prometheus's kinds
// against their own CRDs.
func TestHelmChartIsAcceptedByTheAPIServer(t *testing.T) {
	installThirdPartyCRDs(t)
	cases := map[string][]string{
		"defaults":                nil,
		"everything on":           everythingOn,
		"no webhook, no election": {"--set", "webhook.enabled=false", "--set", "leaderElection.mode=none", "--set", "replicas=1"},
		"a PodMonitor, no RBAC": {"--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podMonitor.authorization.type=Bearer",
			"--set", "metrics.podMonitor.authorization.credentials.name=prometheus-token", "--set", "metrics.podMonitor.authorization.credentials.key=token",
			"--set", "rbac.create=false", "--set", "image.registry=mirror.example:5000"},
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			t.Logf("accepted: %s", strings.Join(serverDryRun(t, chartDir(), newNamespace(t), values), ", "))
		})
	}
}

// serverDryRun renders chart (a directory or a .tgz) with values into ns,
// CRDs included, has the API server take every object in a server-side
// dry run, and returns their kinds.
func serverDryRun(t *testing.T, chart, ns string, values []string) []string {
	t.Helper()
	manifest, err := helm(t, append([]string{"template", "rl", chart, "-n", ns, "--include-crds"}, values...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, manifest)
	}
	kinds := kindsOf(t, manifest)
	out, err := kubectlIn(t, manifest, "apply", "--server-side", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Fatalf("the API server refused %s (%s): %v\n%s", chart, strings.Join(kinds, ", "), err, out)
	}
	if n := strings.Count(out, "(server dry run)"); n != len(kinds) {
		t.Fatalf("%d of %d objects applied:\n%s", n, len(kinds), out)
	}
	return kinds
}

// Bad values fail `helm template` (and so `helm install`) with a message
// that names the value.
func TestHelmChartRejectsBadValues(t *testing.T) {
	cases := []struct {
		set  []string
		want string
	}{
		{[]string{"leaderElection.mode=raft"}, "/leaderElection/mode"},
		{[]string{"leaderElection.mode=redislock"}, "/redis/addrs"},
		{[]string{"leaderElection.mode=none"}, "leaderElection.mode=none needs replicas=1, not 2: without an election every replica runs the controller"},
		{[]string{"replicas=0"}, "/replicas"},
		{[]string{"webhook.certs=vault"}, "/webhook/certs"},
		{[]string{"webhook.failurePolicy=Sometimes"}, "/webhook/failurePolicy"},
		{[]string{"redis.addrs={redis}"}, "/redis/addrs/0"},
		{[]string{"redis.addrs={redis:70000}"}, "/redis/addrs/0"},
		{[]string{"redis.addrs={redis:0}"}, "/redis/addrs/0"},
		{[]string{"redis.mode=Sentinel", "redis.addrs={s:26379}"}, "/redis/masterName"},
		{[]string{"metrics.serviceMonitor.interval=often"}, "/metrics/serviceMonitor/interval"},
		{[]string{"redis.addrs={a:1,b:2}"}, "/redis/addrs': maxItems: got 2, want 1"},
		{[]string{"redis.mode=Redlock", "redis.addrs={a:1,b:2}"}, "/redis/addrs': 'anyOf' failed"},
		{[]string{"redis.masterName=mymaster"}, "/redis/masterName"},
		{[]string{"webhook.certManager.issuerRef.kind=ClusterIssuer"}, "missing property 'name'"},
		{[]string{"metrics.port=8081"}, "/metrics/port"},
		{[]string{"replica=2"}, "additional properties 'replica' not allowed"},
		{[]string{"nameOverride=Redis_Lock"}, "/nameOverride"},
		{[]string{"fullnameOverride=" + strings.Repeat("x", 51)}, "/fullnameOverride"},
		{[]string{"image.digest=latest"}, "/image/digest"},
		{[]string{"imagePullSecrets[0].nam=regcred"}, "/imagePullSecrets/0': missing property 'name'"},
		{[]string{"logLevel=verbose"}, "/logLevel"},
		{[]string{"logLevel=0"}, "/logLevel"},
		{[]string{"extraArgs={resync=1m}"}, "/extraArgs/0"},
		{[]string{"serviceAccount.name=Bad_Name"}, "/serviceAccount/name"},
		{[]string{"serviceAccount.create=maybe"}, "/serviceAccount/create"},
		{[]string{"podLabels.app\\.kubernetes\\.io/name=other"}, "/podLabels"},
		{[]string{"podAnnotations.a=1"}, "/podAnnotations/a"},
		{[]string{"priorityClassName=1"}, "/priorityClassName"},
		{[]string{"securityContext.privileged=yes"}, "/securityContext/privileged"},
		{[]string{"securityContext.runAsUsr=1"}, "additional properties 'runAsUsr' not allowed"},
		{[]string{"podSecurityContext.fsGroup=-1"}, "/podSecurityContext/fsGroup"},
		{[]string{"topologySpreadConstraints[0].whenUnsatisfiable=Never"}, "/topologySpreadConstraints/0/whenUnsatisfiable"},
		{[]string{"topologySpreadConstraints[0].maxSkew=0"}, "/topologySpreadConstraints/0/maxSkew"},
		{[]string{"podDisruptionBudget.maxUnavailable=0"}, "/podDisruptionBudget/maxUnavailable"},
		{[]string{"podDisruptionBudget.maxUnavailable=150%"}, "/podDisruptionBudget/maxUnavailable"},
		{[]string{"webhook.timeoutSeconds=31"}, "/webhook/timeoutSeconds"},
		{[]string{"webhook.namespaceSelector.matchExpressions[0].key=env", "webhook.namespaceSelector.matchExpressions[0].operator=Within"}, "/webhook/namespaceSelector/matchExpressions/0/operator"},
		{[]string{"webhook.objectSelector.matchLabel.app=x"}, "additional properties 'matchLabel' not allowed"},
		{[]string{"agent.image.digest=abc"}, "/agent/image/digest"},
		{[]string{"agent.resources.limits.memory=lots"}, "/agent/resources/limits/memory"},
		{[]string{"agent.resources.requests.gpu=1"}, "additional properties 'gpu' not allowed"},
		{[]string{"leaderElection.mode=none", "replicas=3"}, "leaderElection.mode=none needs replicas=1, not 3"},
		{[]string{"image.registry=https://mirror.example"}, "/image/registry"},
		{[]string{"metrics.podMonitor.enabled=true", "metrics.serviceMonitor.enabled=true"}, "metrics.podMonitor.enabled and metrics.serviceMonitor.enabled: set one"},
		{[]string{"metrics.podMonitor.enabled=true"}, "metrics.podMonitor.enabled with metrics.secure needs metrics.podMonitor.authorization"},
		{[]string{"networkPolicy.metricsFrom={prometheus}"}, "/networkPolicy/metricsFrom/0"},
		{[]string{"rbac.create=no"}, "/rbac/create"},
		// Values each valid alone that cannot work together.
		{[]string{"agent.resources.requests.memory=256Mi"}, "agent.resources.requests.memory 256Mi is above agent.resources.limits.memory 128Mi"},
		{[]string{"agent.resources.requests.memory=2Gi", "agent.resources.limits.memory=1024Mi"}, "agent.resources.requests.memory 2Gi is above agent.resources.limits.memory 1024Mi"},
		{[]string{"metrics.port=9443"}, "metrics.port and webhook.port are both 9443"},
	}
	for _, tc := range cases {
		args := []string{"template", "rl", chartDir()}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, args...)
		if err == nil {
			t.Errorf("--set %v: rendered, want a values error", tc.set)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("--set %v: %q does not name %s", tc.set, strings.TrimSpace(out), tc.want)
		}
	}
}

// Both installs call the webhook only for pods that carry the annotation,
// and never for the pods of the controller's own namespace (so the
// controller can start even with failurePolicy Fail).
func TestWebhookIsScopedToAnnotatedPodsOutsideItsNamespace(t *testing.T) {
	chart, err := helm(t, "template", "rl", chartDir(), "-n", "ops")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ manifest, ns string }{
		"helm":      {chart, "ops"},
		"kustomize": {mustKubectl(t, "kustomize", filepath.Join(repoRoot, "config", "default")), "redislock-system"},
	} {
		var webhooks []any
		for _, doc := range docs(c.manifest) {
			if doc["kind"] == "MutatingWebhookConfiguration" {
				webhooks = doc["webhooks"].([]any)
			}
		}
		if len(webhooks) == 0 {
			t.Fatalf("%s: no webhooks", name)
		}
		for _, w := range webhooks {
			w := w.(map[string]any)
			conds, _ := yaml.Marshal(w["matchConditions"])
			if !strings.Contains(string(conds), "'redislock.io/lock' in object.metadata.annotations") {
				t.Errorf("%s: webhook %v has no matchCondition on the annotation: %s", name, w["name"], conds)
			}
			sel, _ := yaml.Marshal(w["namespaceSelector"])
			if !strings.Contains(string(sel), "NotIn") || !strings.Contains(string(sel), "- "+c.ns+"\n") || !strings.Contains(string(sel), "- kube-system\n") {
				t.Errorf("%s: webhook %v does not exclude kube-system and %s:\n%s", name, w["name"], c.ns, sel)
			}
		}
	}
}

// `kubectl apply -k config/default` is accepted object by object.
func TestKustomizeDefaultIsAcceptedByTheAPIServer(t *testing.T) {
	manifest := mustKubectl(t, "kustomize", filepath.Join(repoRoot, "config", "default"))
	kinds := kindsOf(t, manifest)
	// A dry run creates no namespace, and the namespaced objects need it.
	if _, err := kubectl(t, "get", "namespace", "redislock-system"); err != nil {
		mustKubectl(t, "create", "namespace", "redislock-system")
	}
	out, err := kubectl(t, "apply", "-k", filepath.Join(repoRoot, "config", "default"), "--server-side", "--dry-run=server")
	if err != nil {
		t.Fatalf("the API server refused config/default: %v\n%s", err, out)
	}
	if n := strings.Count(out, "(server dry run)"); n != len(kinds) {
		t.Fatalf("%d of %d objects applied:\n%s", n, len(kinds), out)
	}
	for _, want := range []string{"CustomResourceDefinition", "ClusterRole", "Role", "Deployment", "Service", "MutatingWebhookConfiguration"} {
		if !contains(kinds, want) {
			t.Errorf("config/default has no %s: %v", want, kinds)
		}
	}
	// Available only once Ready for 10 s: kube-proxy routes the webhook's
	// Service meanwhile, so an annotated pod created right after
	// kubectl rollout status gets the agent.
	deployments := 0
	for _, d := range docs(manifest) {
		if d["kind"] == "Deployment" {
			deployments++
			if got := d["spec"].(map[string]any)["minReadySeconds"]; got != float64(10) {
				t.Errorf("config/default: Deployment %v has minReadySeconds %v, want 10", d["metadata"].(map[string]any)["name"], got)
			}
		}
	}
	if deployments != 1 {
		t.Errorf("config/default has %d Deployments, want 1", deployments)
	}
	t.Logf("accepted: %s", strings.Join(kinds, ", "))
}

// The CRDs and RBAC the chart and kustomize install are the generated ones.
func TestInstallManifestsMatchTheGeneratedOnes(t *testing.T) {
	fromKustomize := map[string]map[string]any{}
	for _, doc := range docs(mustKubectl(t, "kustomize", filepath.Join(repoRoot, "config", "default"))) {
		if doc["kind"] == "CustomResourceDefinition" {
			fromKustomize[doc["metadata"].(map[string]any)["name"].(string)] = doc
		}
	}
	rendered, err := helm(t, "template", "redislock-crds", crdsChartDir())
	if err != nil {
		t.Fatal(err)
	}
	fromCRDsChart := map[string]map[string]any{}
	for _, doc := range docs(rendered) {
		fromCRDsChart[doc["metadata"].(map[string]any)["name"].(string)] = doc
	}
	if len(fromCRDsChart) != 3 {
		t.Errorf("charts/redislock-crds renders %d objects, want the 3 CRDs", len(fromCRDsChart))
	}
	for _, crd := range []string{"redislocks", "redisconnections", "clusterredisconnections"} {
		name := crd + ".redislock.io"
		generated := filepath.Join(repoRoot, "config", "crd", "bases", "redislock.io_"+crd+".yaml")
		want := readObject(t, generated)
		if got := readObject(t, filepath.Join(chartDir(), "crds", "redislock.io_"+crd+".yaml")); !reflect.DeepEqual(got, want) {
			t.Errorf("charts/redislock/crds differs from %s; run make manifests", generated)
		}
		if got := readObject(t, filepath.Join(crdsChartDir(), "files", "crds", "redislock.io_"+crd+".yaml")); !reflect.DeepEqual(got, want) {
			t.Errorf("charts/redislock-crds/files/crds differs from %s; run make manifests", generated)
		}
		// charts/redislock-crds renders it with its labels and the keep
		// annotation, and the generated spec.
		if got := fromCRDsChart[name]; got == nil || !reflect.DeepEqual(got["spec"], want["spec"]) {
			t.Errorf("the CRD %s of charts/redislock-crds differs from %s", name, generated)
		}
		if !reflect.DeepEqual(fromKustomize[name], want) {
			t.Errorf("the CRD %s of config/default differs from %s", name, generated)
		}
	}
	for copied, source := range map[string]string{
		"rbac.yaml":                     filepath.Join("config", "rbac", "role.yaml"),
		"agent-role.yaml":               filepath.Join("config", "rbac", "agent", "role.yaml"),
		"agent-policy.yaml":             filepath.Join("config", "rbac", "agent", "policy.yaml"),
		"clusterconnection-reader.yaml": filepath.Join("config", "rbac", "agent", "clusterconnection_reader.yaml"),
		"agent-pod-reader.yaml":         filepath.Join("config", "rbac", "agent", "pod_reader.yaml"),
		"webhook.yaml":                  filepath.Join("config", "webhook", "manifests.yaml"),
		"tenancy.yaml":                  filepath.Join("config", "policy", "tenancy.yaml"),
		"fencing.yaml":                  filepath.Join("config", "policy", "fencing.yaml"),
		"metrics-auth.yaml":             filepath.Join("config", "rbac", "metrics_auth.yaml"),
	} {
		a, errA := os.ReadFile(filepath.Join(chartDir(), "files", copied))
		b, errB := os.ReadFile(filepath.Join(repoRoot, source))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/redislock/files/%s differs from %s (%v, %v); run make manifests", copied, source, errA, errB)
		}
	}
	// And the chart renders the generated rules, not rules of its own.
	manifest, err := helm(t, "template", "rl", chartDir(), "-n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]any{}
	for _, doc := range docs(manifest) {
		if doc["kind"] == "ClusterRole" || doc["kind"] == "Role" {
			name := doc["metadata"].(map[string]any)["name"].(string)
			rules[doc["kind"].(string)+"/"+name] = doc["rules"]
		}
	}
	// The admission policies too (the agent's, the tenancy ones and the
	// fencing one): the chart renders the same specs, under the same names.
	specs := map[string]any{}
	for _, doc := range docs(manifest) {
		if strings.HasPrefix(doc["kind"].(string), "ValidatingAdmissionPolicy") {
			specs[doc["kind"].(string)+"/"+doc["metadata"].(map[string]any)["name"].(string)] = doc["spec"]
		}
	}
	policies := 0
	for _, source := range []string{filepath.Join("config", "rbac", "agent", "policy.yaml"), filepath.Join("config", "policy", "tenancy.yaml"), filepath.Join("config", "policy", "fencing.yaml")} {
		for _, doc := range docs(readFile(t, filepath.Join(repoRoot, source))) {
			policies++
			key := doc["kind"].(string) + "/" + doc["metadata"].(map[string]any)["name"].(string)
			if !reflect.DeepEqual(specs[key], doc["spec"]) {
				t.Errorf("chart %s differs from %s", key, source)
			}
		}
	}
	// The agent-required policy names its release: rendered as the release
	// redislock in redislock-system, the chart's is the one of config/.
	asKustomize, err := helm(t, "template", "redislock", chartDir(), "-n", "redislock-system", "--show-only", "templates/agent-required-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	required := docs(readFile(t, filepath.Join(repoRoot, "config", "policy", "agent_required.yaml")))
	for i, doc := range docs(asKustomize) {
		policies++
		if i >= len(required) || !reflect.DeepEqual(doc["spec"], required[i]["spec"]) || doc["metadata"].(map[string]any)["name"] != required[i]["metadata"].(map[string]any)["name"] {
			t.Errorf("the chart's %s %v, rendered as the release redislock, differs from config/policy/agent_required.yaml", doc["kind"], doc["metadata"].(map[string]any)["name"])
		}
	}
	if len(required) != 2 {
		t.Errorf("config/policy/agent_required.yaml has %d objects, want the policy and its binding", len(required))
	}
	if len(specs) != policies {
		t.Errorf("the chart renders %d admission policies and bindings, want the %d of config/", len(specs), policies)
	}
	// The controller's rules, grant by grant: the chart renders each
	// generated one, with its own names where the generated ones name
	// objects, and splits rules only between the ClusterRole and the
	// election Role as the generated ClusterRole and Role do.
	renamed := strings.NewReplacer("redislock-mutating-webhook-configuration", "rl-redislock-injector", "redislock-webhook-cert", "rl-redislock-webhook-cert")
	for _, doc := range append(docs(readFile(t, filepath.Join(repoRoot, "config", "rbac", "role.yaml"))), docs(readFile(t, filepath.Join(repoRoot, "config", "rbac", "agent", "role.yaml")))...) {
		kind, name := doc["kind"].(string), doc["metadata"].(map[string]any)["name"].(string)
		var want []string
		for _, g := range grants(doc["rules"]) {
			want = append(want, renamed.Replace(g))
		}
		switch {
		case kind == "ClusterRole" && name == "redislock-controller":
			name = "rl-redislock-controller"
		case kind == "Role":
			name = "rl-redislock-controller-election"
		}
		if got := grants(rules[kind+"/"+name]); !slices.Equal(got, want) {
			t.Errorf("chart %s/%s grants differ from the generated ones:\n got %v\nwant %v", kind, name, got, want)
		}
	}
}

// grants expands RBAC rules into sorted "group resource name verb" lines,
// one per permission.
func grants(rules any) []string {
	list := func(r map[string]any, k string) []string {
		var out []string
		for _, v := range r[k].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	var out []string
	rs, _ := rules.([]any)
	for _, r := range rs {
		r := r.(map[string]any)
		names := []string{"*"}
		if r["resourceNames"] != nil {
			names = list(r, "resourceNames")
		}
		for _, g := range list(r, "apiGroups") {
			for _, res := range list(r, "resources") {
				for _, n := range names {
					for _, v := range list(r, "verbs") {
						out = append(out, strings.Join([]string{g, res, n, v}, " "))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readObject(t *testing.T, path string) map[string]any {
	t.Helper()
	ds := docs(readFile(t, path))
	if len(ds) != 1 {
		t.Fatalf("%s holds %d objects, want 1", path, len(ds))
	}
	return ds[0]
}

// docs parses a multi-document YAML stream.
func docs(s string) []map[string]any {
	var out []map[string]any
	for _, part := range strings.Split(s, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err == nil && m != nil {
			out = append(out, m)
		}
	}
	return out
}

// kindsOf lists the kind/name of every object in manifest.
func kindsOf(t *testing.T, manifest string) []string {
	t.Helper()
	var kinds []string
	for _, d := range docs(manifest) {
		kind, _ := d["kind"].(string)
		kinds = append(kinds, kind)
	}
	if len(kinds) == 0 {
		t.Fatalf("no objects in:\n%s", manifest)
	}
	return kinds
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
