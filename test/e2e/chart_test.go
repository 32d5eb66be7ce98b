package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/inject"
)

// everythingOn sets every value of the chart away from its default (the
// dry run checks the API server takes the result, TestHelmChartRendersEveryValue
// that each lands where it should).
var everythingOn = []string{
	"--set", "replicas=3",
	"--set", "minReadySeconds=25",
	"--set", "nameOverride=rlk", "--set", "fullnameOverride=platform-rlk",
	"--set", "image.repository=registry.example/redislock", "--set", "image.tag=v9.9.9", "--set", "image.pullPolicy=Always",
	"--set", "image.digest=sha256:" + strings.Repeat("ab", 32),
	"--set", "imagePullSecrets[0].name=regcred",
	"--set", "leaderElection.mode=redislock",
	"--set", "redis.mode=Sentinel", "--set", "redis.addrs={sentinel-0.redis:26379,sentinel-1.redis:26379,sentinel-2.redis:26379}",
	"--set", "redis.masterName=mymaster", "--set", "redis.existingSecret=redis-auth",
	"--set", "webhook.certs=cert-manager", "--set", "webhook.failurePolicy=Fail", "--set", "webhook.port=10250",
	"--set", "webhook.timeoutSeconds=12",
	"--set", "webhook.namespaceSelector.matchLabels.team=payments",
	"--set", "webhook.namespaceSelector.matchExpressions[0].key=env", "--set", "webhook.namespaceSelector.matchExpressions[0].operator=In",
	"--set", "webhook.namespaceSelector.matchExpressions[0].values={prod,staging}",
	"--set", "webhook.objectSelector.matchLabels.redislock\\.io/inject=enabled",
	"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom",
	"--set", "metrics.serviceMonitor.scrapeTimeout=5s", "--set", "metrics.serviceMonitor.relabelings[0].targetLabel=cluster",
	"--set", "metrics.serviceMonitor.relabelings[0].replacement=prod-1",
	"--set", "metrics.serviceMonitor.tlsConfig.insecureSkipVerify=false", "--set", "metrics.serviceMonitor.tlsConfig.serverName=platform-rlk-metrics.ops.svc",
	"--set", "webhook.annotations.example\\.com/owner=platform",
	"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom",
	"--set", "metrics.dashboard.enabled=true", "--set", "metrics.dashboard.labels.grafana_folder=locks",
	"--set", "metrics.prometheusRule.noLeaderFor=7m", "--set", "metrics.prometheusRule.notReadyFor=8m",
	"--set", "metrics.prometheusRule.acquireErrorsFor=9m", "--set", "metrics.prometheusRule.controllerDownFor=11m",
	"--set", "nodeSelector.example\\.com/pool=system",
	"--set", "tolerations[0].key=dedicated", "--set", "tolerations[0].operator=Exists",
	"--set", "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=100",
	"--set", "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=kubernetes.io/hostname",
	"--set", "resources.requests.cpu=100m",
	"--set", "topologySpreadConstraints[0].maxSkew=2", "--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
	"--set", "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
	"--set", "podDisruptionBudget.maxUnavailable=34%",
	"--set", "podAnnotations.example\\.com/team=platform", "--set", "podLabels.team=platform",
	"--set", "priorityClassName=system-cluster-critical",
	"--set", "serviceAccount.name=redislock-sa", "--set", "serviceAccount.annotations.example\\.com/role=redislock",
	"--set", "logLevel=debug", "--set", "extraArgs={-resync=1m}", "--set", "lockClass=blue",
	"--set", "podSecurityContext.runAsUser=65532", "--set", "podSecurityContext.fsGroup=65532",
	"--set", "securityContext.runAsUser=65532", "--set", "securityContext.readOnlyRootFilesystem=null",
	"--set", "agent.image.repository=registry.example/agent", "--set", "agent.image.tag=v9.9.8",
	"--set", "agent.resources.requests.cpu=20m", "--set", "agent.resources.requests.memory=48Mi",
	"--set", "agent.resources.limits.cpu=200m", "--set", "agent.resources.limits.memory=96Mi",
	"--set", "webhook.waitJob.timeoutSeconds=300", "--set", "webhook.waitJob.resources.requests.cpu=5m",
	"--set", "global.imagePullSecrets[0].name=parentcred",
	"--set", "commonLabels.team=platform", "--set", "deploymentAnnotations.example\\.com/owner=platform",
	"--set", "strategy.type=RollingUpdate", "--set", "strategy.rollingUpdate.maxUnavailable=0", "--set", "strategy.rollingUpdate.maxSurge=1",
	"--set", "revisionHistoryLimit=3",
	"--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy.example:3128",
	"--set", "extraVolumes[0].name=ca", "--set", "extraVolumes[0].configMap.name=corp-ca",
	"--set", "extraVolumeMounts[0].name=ca", "--set", "extraVolumeMounts[0].mountPath=/etc/corp-ca", "--set", "extraVolumeMounts[0].readOnly=true",
	"--set", "livenessProbe.timeoutSeconds=3", "--set", "livenessProbe.failureThreshold=5", "--set", "readinessProbe.periodSeconds=2",
	"--set", "serviceAccount.automountServiceAccountToken=false", "--set", "webhook.hostNetwork=true",
	"--set", "networkPolicy.enabled=true", "--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
	"--set", "networkPolicy.egress.enabled=true", "--set", "networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.5/32",
	"--set", "networkPolicy.egress.apiServerPorts={6443}", "--set", "networkPolicy.egress.dns[0].ipBlock.cidr=10.96.0.10/32",
	"--set", "networkPolicy.egress.redisCIDRs={10.20.0.0/16}", "--set", "networkPolicy.egress.redisPorts={6379,26379}",
	"--set", "redisAccess.allowInline=false", "--set", "redisAccess.allowedDestinations={10.20.0.0/16,redis.example.com}",
}

// render runs helm template of chart in namespace "ops" and returns its objects.
func render(t *testing.T, chart string, values ...string) []map[string]any {
	t.Helper()
	out, err := helm(t, append([]string{"template", "rl", chart, "-n", "ops"}, values...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return docs(out)
}

// object returns the rendered object of kind, failing the test without one.
func object(t *testing.T, objs []map[string]any, kind string) map[string]any {
	t.Helper()
	if o := findKind(objs, kind); o != nil {
		return o
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

func findKind(objs []map[string]any, kind string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind {
			return o
		}
	}
	return nil
}

// at returns the value at a dotted path of obj ("spec.containers.0.args");
// a key may hold dots when quoted in brackets ("labels[app.kubernetes.io/name]").
func at(obj any, path string) any {
	for _, key := range pathKeys.FindAllString(path, -1) {
		key = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(key, "."), "["), "]")
		switch o := obj.(type) {
		case map[string]any:
			obj = o[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i >= len(o) {
				return nil
			}
			obj = o[i]
		default:
			return nil
		}
	}
	return obj
}

var pathKeys = regexp.MustCompile(`\[[^\]]+\]|\.?[^.\[]+`)

// asYAML shows a value in failure messages.
func asYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// Every value the chart takes lands where it should (the dry run in
// TestHelmChartIsAcceptedByTheAPIServer checks the API server takes it).
func TestHelmChartRendersEveryValue(t *testing.T) {
	objs := render(t, chartDir(), everythingOn...)
	dep := object(t, objs, "Deployment")
	pod := at(dep, "spec.template").(map[string]any)
	ctr := at(pod, "spec.containers.0")
	args := fmt.Sprint(at(ctr, "args"))
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		what string
		got  any
		want any
	}{
		{"fullnameOverride names the Deployment", at(dep, "metadata.name"), "platform-rlk-controller"},
		{"nameOverride is the name label", at(dep, "metadata.labels[app.kubernetes.io/name]"), "rlk"},
		{"image.digest pins the image", at(ctr, "image"), "registry.example/redislock@" + digest},
		{"global.imagePullSecrets, then imagePullSecrets", at(pod, "spec.imagePullSecrets"), []any{map[string]any{"name": "parentcred"}, map[string]any{"name": "regcred"}}},
		{"commonLabels on the Deployment", at(dep, "metadata.labels.team"), "platform"},
		{"commonLabels on the Service", at(object(t, objs, "Service"), "metadata.labels.team"), "platform"},
		{"deploymentAnnotations", at(dep, "metadata.annotations[example.com/owner]"), "platform"},
		{"strategy", at(dep, "spec.strategy"), map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": float64(0), "maxSurge": float64(1)}}},
		{"revisionHistoryLimit", at(dep, "spec.revisionHistoryLimit"), float64(3)},
		{"serviceMonitor.scrapeTimeout", at(object(t, objs, "ServiceMonitor"), "spec.endpoints.0.scrapeTimeout"), "5s"},
		{"serviceMonitor.relabelings", at(object(t, objs, "ServiceMonitor"), "spec.endpoints.0.relabelings"), []any{map[string]any{"targetLabel": "cluster", "replacement": "prod-1"}}},
		{"serviceMonitor.namespace", at(object(t, render(t, chartDir(), "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.namespace=monitoring"), "ServiceMonitor"), "metadata.namespace"), "monitoring"},
		{"webhook.annotations beside cert-manager's", at(object(t, objs, "MutatingWebhookConfiguration"), "metadata.annotations"), map[string]any{
			"example.com/owner": "platform", "cert-manager.io/inject-ca-from": "ops/platform-rlk-webhook-cert"}},
		{"nodeSelector adds to the default kubernetes.io/os: linux", at(pod, "spec.nodeSelector"), map[string]any{"kubernetes.io/os": "linux", "example.com/pool": "system"}},
		{"extraEnv after the chart's", at(ctr, "env.2"), map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}},
		{"extraVolumes after the chart's", at(pod, "spec.volumes.1"), map[string]any{"name": "ca", "configMap": map[string]any{"name": "corp-ca"}}},
		{"extraVolumeMounts after the chart's", at(ctr, "volumeMounts.1"), map[string]any{"name": "ca", "mountPath": "/etc/corp-ca", "readOnly": true}},
		{"livenessProbe over the chart's", at(ctr, "livenessProbe"), map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "probes"}, "periodSeconds": float64(10), "timeoutSeconds": float64(3), "failureThreshold": float64(5)}},
		{"readinessProbe over the chart's", at(ctr, "readinessProbe"), map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": "probes"}, "periodSeconds": float64(2)}},
		{"podAnnotations", at(pod, "metadata.annotations[example.com/team]"), "platform"},
		{"podLabels", at(pod, "metadata.labels.team"), "platform"},
		{"podLabels keep the selector's", at(pod, "metadata.labels[app.kubernetes.io/component]"), "controller"},
		{"priorityClassName", at(pod, "spec.priorityClassName"), "system-cluster-critical"},
		{"serviceAccount.name", at(pod, "spec.serviceAccountName"), "redislock-sa"},
		{"the ServiceAccount", at(object(t, objs, "ServiceAccount"), "metadata.name"), "redislock-sa"},
		{"lockClass", strings.Contains(args, "-lock-class=blue"), true},
		{"the ClusterRoleBinding binds serviceAccount.name", at(object(t, objs, "ClusterRoleBinding"), "subjects.0.name"), "redislock-sa"},
		{"serviceAccount.annotations", at(object(t, objs, "ServiceAccount"), "metadata.annotations[example.com/role]"), "redislock"},
		{"podSecurityContext merges into the default", at(pod, "spec.securityContext"), map[string]any{
			"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}, "runAsUser": float64(65532), "fsGroup": float64(65532)}},
		{"securityContext merges into the default, null drops a key", at(ctr, "securityContext"), map[string]any{
			"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}}, "runAsUser": float64(65532)}},
		{"topologySpreadConstraints, with the pods' selector added", at(pod, "spec.topologySpreadConstraints"), []any{map[string]any{
			"maxSkew": float64(2), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "rlk", "app.kubernetes.io/instance": "rl", "app.kubernetes.io/component": "controller"}}}}},
		{"podDisruptionBudget.maxUnavailable", at(object(t, objs, "PodDisruptionBudget"), "spec.maxUnavailable"), "34%"},
		{"podDisruptionBudget.minAvailable replaces maxUnavailable", func() []any {
			spec := at(object(t, render(t, chartDir(), "--set", "podDisruptionBudget.minAvailable=50%"), "PodDisruptionBudget"), "spec").(map[string]any)
			return []any{spec["minAvailable"], spec["maxUnavailable"]}
		}(), []any{"50%", nil}},
		{"minReadySeconds", at(dep, "spec.minReadySeconds"), float64(25)},
		{"serviceAccount.automountServiceAccountToken", at(object(t, objs, "ServiceAccount"), "automountServiceAccountToken"), false},
		{"webhook.hostNetwork", []any{at(pod, "spec.hostNetwork"), at(pod, "spec.dnsPolicy")}, []any{true, "ClusterFirstWithHostNet"}},
		{"networkPolicy: the webhook from anywhere, metrics from metricsFrom, the probes", at(object(t, objs, "NetworkPolicy"), "spec"), map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "rlk", "app.kubernetes.io/instance": "rl", "app.kubernetes.io/component": "controller"}},
			"policyTypes": []any{"Ingress"},
			"ingress": []any{
				map[string]any{"ports": []any{map[string]any{"port": "webhook"}}},
				map[string]any{"ports": []any{map[string]any{"port": "metrics"}}, "from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}}},
				map[string]any{"ports": []any{map[string]any{"port": "probes"}}},
			}}},
		{"image.registry prefixes the controller's and the agent's repositories", func() []any {
			mirrored := render(t, chartDir(), "--set", "image.registry=mirror.example:5000", "--set", "agent.image.repository=team/agent")
			c := at(object(t, mirrored, "Deployment"), "spec.template.spec.containers.0")
			return []any{at(c, "image"), slices.Contains(at(c, "args").([]any), any("-agent-image=mirror.example:5000/team/agent:v0.1.0"))}
		}(), []any{"mirror.example:5000/ghcr.io/redislock/redislock:v0.1.0", true}},
		{"rbac.create=false: none of the controller's roles or bindings", func() []any {
			var names []any
			for _, o := range render(t, chartDir(), "--set", "rbac.create=false") {
				if k := at(o, "kind").(string); strings.Contains(k, "Role") && strings.Contains(at(o, "metadata.name").(string), "-controller") || strings.Contains(at(o, "metadata.name").(string), "-metrics-") {
					names = append(names, k+"/"+at(o, "metadata.name").(string))
				}
			}
			return names
		}(), []any(nil)},
		{"metrics.podMonitor: a PodMonitor of the controller pods, with the token from its Secret", func() any {
			pm := object(t, render(t, chartDir(), "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podMonitor.authorization.type=Bearer",
				"--set", "metrics.podMonitor.authorization.credentials.name=prometheus-token", "--set", "metrics.podMonitor.authorization.credentials.key=token",
				"--set", "metrics.serviceMonitor.interval=15s"), "PodMonitor")
			return at(pm, "spec")
		}(), map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "redislock", "app.kubernetes.io/instance": "rl", "app.kubernetes.io/component": "controller"}},
			"namespaceSelector": map[string]any{"matchNames": []any{"ops"}},
			"podMetricsEndpoints": []any{map[string]any{"port": "metrics", "interval": "15s", "scheme": "https",
				"relabelings":   []any{map[string]any{"action": "replace", "targetLabel": "job", "replacement": "rl-redislock-metrics"}},
				"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
				"tlsConfig":     map[string]any{"insecureSkipVerify": true}}},
		}},
		{"metrics.secure: the ServiceMonitor scrapes over HTTPS with its token, checked as tlsConfig says", func() []any {
			ep := at(object(t, objs, "ServiceMonitor"), "spec.endpoints.0").(map[string]any)
			return []any{ep["scheme"], ep["bearerTokenFile"], ep["tlsConfig"]}
		}(), []any{"https", "/var/run/secrets/kubernetes.io/serviceaccount/token", map[string]any{"insecureSkipVerify": false, "serverName": "platform-rlk-metrics.ops.svc"}}},
		{"metrics.secure: the controller reviews tokens, and the reader role is made", func() []any {
			var names []any
			for _, o := range objs {
				if n := at(o, "metadata.name").(string); strings.Contains(n, "-metrics-") {
					names = append(names, at(o, "kind").(string)+"/"+n)
				}
			}
			return append(names, slices.Contains(at(ctr, "args").([]any), any("-metrics-secure")))
		}(), []any{"ClusterRole/platform-rlk-metrics-auth", "ClusterRole/platform-rlk-metrics-reader", "ClusterRoleBinding/platform-rlk-metrics-auth", true}},
		{"metrics.secure=false: plain HTTP, no token, no review RBAC", func() []any {
			plain := render(t, chartDir(), "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.secure=false")
			ep := at(object(t, plain, "ServiceMonitor"), "spec.endpoints.0").(map[string]any)
			var rbac []any
			for _, o := range plain {
				if n := at(o, "metadata.name").(string); strings.Contains(n, "-metrics-") {
					rbac = append(rbac, n)
				}
			}
			args := at(object(t, plain, "Deployment"), "spec.template.spec.containers.0.args").([]any)
			return []any{ep["scheme"], ep["bearerTokenFile"], len(rbac), slices.Contains(args, any("-metrics-secure"))}
		}(), []any{nil, nil, 0, false}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.what, asYAML(c.got), asYAML(c.want))
		}
	}
	for _, want := range []string{
		"-zap-log-level=debug", "-resync=1m",
		"-agent-image=registry.example/agent:v9.9.8",
		"-agent-cpu-request=20m", "-agent-memory-request=48Mi", "-agent-cpu-limit=200m", "-agent-memory-limit=96Mi",
		"-webhook-configuration=platform-rlk-injector",
	} {
		if !slices.Contains(at(ctr, "args").([]any), any(want)) {
			t.Errorf("controller args %s lack %s", args, want)
		}
	}
	wh := at(object(t, objs, "MutatingWebhookConfiguration"), "webhooks.0")
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"webhook.timeoutSeconds", at(wh, "timeoutSeconds"), float64(12)},
		{"webhook.namespaceSelector, ANDed with the exclusions", at(wh, "namespaceSelector"), map[string]any{
			"matchLabels": map[string]any{"team": "payments"},
			"matchExpressions": []any{
				map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", "kube-node-lease", "ops"}},
				map[string]any{"key": "env", "operator": "In", "values": []any{"prod", "staging"}},
			}}},
		{"webhook.objectSelector", at(wh, "objectSelector"), map[string]any{"matchLabels": map[string]any{"redislock.io/inject": "enabled"}}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.what, asYAML(c.got), asYAML(c.want))
		}
	}
}

// The defaults: the spread over nodes that a one-node cluster still
// schedules, a PDB with two replicas, the agent with the injector's
// defaults, and no knob rendered that was not asked for.
func TestHelmChartDefaults(t *testing.T) {
	objs := render(t, chartDir())
	dep := object(t, objs, "Deployment")
	pod := at(dep, "spec.template").(map[string]any)
	ctr := at(pod, "spec.containers.0")
	selector := at(dep, "spec.selector.matchLabels")
	spread := []any{map[string]any{"maxSkew": float64(1), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": selector}}}
	if got := at(pod, "spec.topologySpreadConstraints"); !reflect.DeepEqual(got, spread) {
		t.Errorf("topologySpreadConstraints:\n%s\nwant\n%s", asYAML(got), asYAML(spread))
	}
	pdb := object(t, objs, "PodDisruptionBudget")
	if got := at(pdb, "spec"); !reflect.DeepEqual(got, map[string]any{"maxUnavailable": float64(1), "selector": map[string]any{"matchLabels": selector}}) {
		t.Errorf("PodDisruptionBudget spec:\n%s", asYAML(got))
	}
	if got := at(ctr, "image"); got != "ghcr.io/redislock/redislock:v0.1.0" {
		t.Errorf("image %v", got)
	}
	// Available only once Ready for 10 s: kube-proxy routes the webhook's
	// Service meanwhile, so an annotated pod created right after
	// helm install --wait gets the agent.
	if got := at(dep, "spec.minReadySeconds"); got != float64(10) {
		t.Errorf("minReadySeconds %v, want 10", got)
	}
	// The agent's resources default to the injector's own defaults.
	agent := inject.DefaultResources()
	q := func(l corev1.ResourceList, name corev1.ResourceName) string {
		if v, ok := l[name]; ok {
			return v.String()
		}
		return ""
	}
	for _, want := range []string{"-zap-log-level=info", "-agent-image=ghcr.io/redislock/redislock:v0.1.0",
		"-agent-cpu-request=" + q(agent.Requests, corev1.ResourceCPU), "-agent-memory-request=" + q(agent.Requests, corev1.ResourceMemory),
		"-agent-cpu-limit=" + q(agent.Limits, corev1.ResourceCPU), "-agent-memory-limit=" + q(agent.Limits, corev1.ResourceMemory)} {
		if !slices.Contains(at(ctr, "args").([]any), any(want)) {
			t.Errorf("controller args %v lack %s", at(ctr, "args"), want)
		}
	}
	for _, path := range []string{"spec.imagePullSecrets", "spec.priorityClassName", "metadata.annotations"} {
		if v := at(pod, path); v != nil {
			t.Errorf("%s rendered by default: %s", path, asYAML(v))
		}
	}
	wh := at(object(t, objs, "MutatingWebhookConfiguration"), "webhooks.0")
	if at(wh, "objectSelector") != nil || at(wh, "namespaceSelector.matchLabels") != nil || at(wh, "timeoutSeconds") != float64(5) {
		t.Errorf("webhook defaults: %s", asYAML(wh))
	}
	if got := at(object(t, objs, "ServiceAccount"), "metadata.name"); got != at(pod, "spec.serviceAccountName") {
		t.Errorf("ServiceAccount %v, pods run as %v", got, at(pod, "spec.serviceAccountName"))
	}
	bindings := 0
	for _, o := range objs {
		if o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding" {
			bindings++
			if got := at(o, "subjects.0.name"); got != at(pod, "spec.serviceAccountName") {
				t.Errorf("%s %v binds %v, pods run as %v", o["kind"], at(o, "metadata.name"), got, at(pod, "spec.serviceAccountName"))
			}
		}
	}
	if bindings == 0 {
		t.Error("no role bindings rendered")
	}

	// One replica: no PDB (it would block every drain); the spread stays harmless.
	if pdb := findKind(render(t, chartDir(), "--set", "replicas=1"), "PodDisruptionBudget"); pdb != nil {
		t.Errorf("a PodDisruptionBudget with one replica:\n%s", asYAML(pdb))
	}
	if pdb := findKind(render(t, chartDir(), "--set", "podDisruptionBudget.enabled=false"), "PodDisruptionBudget"); pdb != nil {
		t.Errorf("a PodDisruptionBudget with podDisruptionBudget.enabled=false")
	}
	none := render(t, chartDir(), "--set", "topologySpreadConstraints=null", "--set", "serviceAccount.create=false")
	if v := at(object(t, none, "Deployment"), "spec.template.spec.topologySpreadConstraints"); v != nil {
		t.Errorf("topologySpreadConstraints=null still renders %s", asYAML(v))
	}
	if sa := findKind(none, "ServiceAccount"); sa != nil {
		t.Errorf("serviceAccount.create=false still renders %v", at(sa, "metadata.name"))
	}
	// A digest alone pins the controller's image, which the agent follows.
	args := at(object(t, render(t, chartDir(), "--set", "image.digest=sha256:"+strings.Repeat("0f", 32)), "Deployment"), "spec.template.spec.containers.0.args").([]any)
	if want := "-agent-image=ghcr.io/redislock/redislock@sha256:" + strings.Repeat("0f", 32); !slices.Contains(args, any(want)) {
		t.Errorf("args %v lack %s", args, want)
	}
}

// byName returns the rendered kind named name, failing the test without it.
func byName(t *testing.T, objs []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && at(o, "metadata.name") == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// The webhook-wait hook Job: a post-install and post-upgrade hook (helm
// waits for it, --wait or not) that POSTs to the webhook under the name
// its certificate has and its configuration calls, at the ClusterIP of
// the Service that the kubelet puts in the pod's env (the Service is no
// hook, so it exists before the Job's pod), checking the certificate
// against the CA of the Secret the controller writes, and with the
// controller's image and security settings; none without the webhook.
func TestHelmWebhookWaitJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		// what depends on the values
		fullname, image, timeout string
		deadline                 float64
		resources                map[string]any
	}{
		{"defaults", nil, "rl-redislock", "ghcr.io/redislock/redislock:v0.1.0", "-timeout=120s", 180,
			map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}, "limits": map[string]any{"memory": "64Mi"}}},
		{"every value set", everythingOn, "platform-rlk", "registry.example/redislock@sha256:" + strings.Repeat("ab", 32), "-timeout=300s", 360,
			map[string]any{"requests": map[string]any{"cpu": "5m", "memory": "16Mi"}, "limits": map[string]any{"memory": "64Mi"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, chartDir(), tc.values...)
			job := byName(t, objs, "Job", tc.fullname+"-webhook-wait")
			dep := object(t, objs, "Deployment")
			svc := byName(t, objs, "Service", tc.fullname+"-webhook")
			wh := at(object(t, objs, "MutatingWebhookConfiguration"), "webhooks.0")
			pod := at(job, "spec.template.spec")
			ctr := at(pod, "containers.0")
			depPod := at(dep, "spec.template.spec")
			host := fmt.Sprintf("%s.%s.svc", at(wh, "clientConfig.service.name"), at(wh, "clientConfig.service.namespace"))
			hostVar := strings.ToUpper(strings.ReplaceAll(at(svc, "metadata.name").(string), "-", "_")) + "_SERVICE_HOST"
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"a post-install and post-upgrade hook", at(job, "metadata.annotations[helm.sh/hook]"), "post-install,post-upgrade"},
				{"deleted before the next and once it succeeded", at(job, "metadata.annotations[helm.sh/hook-delete-policy]"), "before-hook-creation,hook-succeeded"},
				{"the Service is no hook: it exists before the Job's pod starts", at(svc, "metadata.annotations[helm.sh/hook]"), nil},
				{"the command retries, the Job does not", at(job, "spec.backoffLimit"), float64(0)},
				{"activeDeadlineSeconds: the timeout and a minute to start", at(job, "spec.activeDeadlineSeconds"), tc.deadline},
				{"never restarted", at(pod, "restartPolicy"), "Never"},
				{"no token: it needs no RBAC", at(pod, "automountServiceAccountToken"), false},
				{"the Service env vars", at(pod, "enableServiceLinks"), true},
				{"the controller's image", at(ctr, "image"), tc.image},
				{"the controller's pull policy", at(ctr, "imagePullPolicy"), at(depPod, "containers.0.imagePullPolicy")},
				{"the controller's imagePullSecrets", at(pod, "imagePullSecrets"), at(depPod, "imagePullSecrets")},
				{"the controller's podSecurityContext", at(pod, "securityContext"), at(depPod, "securityContext")},
				{"the controller's securityContext", at(ctr, "securityContext"), at(depPod, "containers.0.securityContext")},
				{"the controller's priorityClassName", at(pod, "priorityClassName"), at(depPod, "priorityClassName")},
				{"the controller's nodeSelector", at(pod, "nodeSelector"), at(depPod, "nodeSelector")},
				{"the controller's tolerations", at(pod, "tolerations"), at(depPod, "tolerations")},
				{"webhook.waitJob.resources", at(ctr, "resources"), tc.resources},
				{"args", at(ctr, "args"), []any{
					"webhook-wait",
					"-url=https://" + host + ":443" + at(wh, "clientConfig.service.path").(string),
					"-connect=$(" + hostVar + ")",
					"-ca-file=/etc/redislock-webhook-ca/ca.crt",
					tc.timeout,
				}},
				{"the CA of the webhook's Secret, and nothing else of it", at(pod, "volumes.0.secret"), map[string]any{
					"secretName": tc.fullname + "-webhook-cert", "items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}},
				{"mounted where -ca-file reads", at(ctr, "volumeMounts.0.mountPath"), "/etc/redislock-webhook-ca"},
				{"not a controller pod (no Service or PDB selects it)", at(job, "spec.template.metadata.labels[app.kubernetes.io/component]"), "webhook-wait"},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s: got\n%s\nwant\n%s", c.what, asYAML(c.got), asYAML(c.want))
				}
			}
			// The name the Job asks for is one the certificate holds.
			if args := at(dep, "spec.template.spec.containers.0.args").([]any); tc.values == nil && !slices.Contains(args, any("-webhook-hosts="+host)) {
				t.Errorf("the Job calls %s, the controller's certificate is for %v", host, args)
			}
		})
	}
	for _, values := range [][]string{
		{"--set", "webhook.waitJob.enabled=false"},
		{"--set", "webhook.enabled=false"},
	} {
		if job := findKind(render(t, chartDir(), values...), "Job"); job != nil {
			t.Errorf("%v still renders the Job %v", values, at(job, "metadata.name"))
		}
	}
}

// The ServiceMonitor selects the metrics Service on labels an upgrade
// does not change.
func TestHelmServiceMonitorSelectsOnStableLabels(t *testing.T) {
	objs := render(t, chartDir(), "--set", "metrics.serviceMonitor.enabled=true")
	sel := at(object(t, objs, "ServiceMonitor"), "spec.selector.matchLabels").(map[string]any)
	var metrics map[string]any
	for _, o := range objs {
		if o["kind"] == "Service" && at(o, "metadata.name") == "rl-redislock-metrics" {
			metrics = o
		}
	}
	if metrics == nil {
		t.Fatal("no metrics Service")
	}
	for k, v := range sel {
		if k == "app.kubernetes.io/version" || k == "helm.sh/chart" {
			t.Errorf("the ServiceMonitor selects on %s, which changes with every release", k)
		}
		if at(metrics, "metadata.labels["+k+"]") != v {
			t.Errorf("the ServiceMonitor selects %s=%v, the metrics Service has %v", k, v, at(metrics, "metadata.labels["+k+"]"))
		}
	}
	if sel["app.kubernetes.io/component"] != "metrics" {
		t.Errorf("the ServiceMonitor selector %v would also pick the webhook Service", sel)
	}
}

// The alerts' job is the job of the monitor in use: a ServiceMonitor's
// targets take the metrics Service's name, and a PodMonitor's would take
// <namespace>/<name> unless relabelled, so the chart relabels them to the
// same name. Before, with metrics.podMonitor the controller-down alert
// fired for ever.
func TestHelmAlertsMatchTheMonitorsJob(t *testing.T) {
	jobOf := func(objs []map[string]any) string {
		t.Helper()
		rule := asYAML(object(t, objs, "PrometheusRule"))
		m := regexp.MustCompile(`absent\(up\{job="([^"]+)"`).FindStringSubmatch(rule)
		if m == nil {
			t.Fatalf("no controller-down alert on up{job=...} in:\n%s", rule)
		}
		return m[1]
	}
	sm := render(t, chartDir(), "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true")
	byName(t, sm, "Service", jobOf(sm)) // a ServiceMonitor's job is the Service's name
	pm := render(t, chartDir(), "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.secure=false", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.serviceMonitor.relabelings[0].action=labeldrop", "--set", "metrics.serviceMonitor.relabelings[0].regex=pod_template_hash")
	relabel := at(object(t, pm, "PodMonitor"), "spec.podMetricsEndpoints.0.relabelings").([]any)
	first := relabel[0].(map[string]any)
	if first["targetLabel"] != "job" || first["replacement"] != jobOf(pm) {
		t.Errorf("with a PodMonitor the alerts match job %q; its first relabeling is %v", jobOf(pm), first)
	}
	if len(relabel) != 2 || relabel[1].(map[string]any)["action"] != "labeldrop" {
		t.Errorf("the PodMonitor lost the user's relabelings: %v", relabel)
	}
}

// The chart packaged as `make chart` does (helm package) carries the
// version and appVersion of Chart.yaml and its CRDs, and installs without
// a clone: helm install of the .tgz with a server-side dry run, and every
// object it renders taken by the API server.
func TestHelmPackagedChartInstalls(t *testing.T) {
	installThirdPartyCRDs(t)
	dir := t.TempDir()
	if out, err := helm(t, "package", chartDir(), "--destination", dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir(), "Chart.yaml"))), &chart); err != nil || chart.Version == "" || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml: version %q, appVersion %q, %v", chart.Version, chart.AppVersion, err)
	}
	tgz := filepath.Join(dir, "redislock-"+chart.Version+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		t.Fatal(err)
	}
	shown, err := helm(t, "show", "chart", tgz)
	if err != nil || !strings.Contains(shown, "version: "+chart.Version+"\n") || !strings.Contains(shown, "appVersion: "+chart.AppVersion+"\n") {
		t.Fatalf("helm show chart %s (%v):\n%s", tgz, err, shown)
	}
	crdFiles, err := filepath.Glob(filepath.Join(chartDir(), "crds", "*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("the chart's crds/: %v %v", crdFiles, err)
	}
	var want []map[string]any
	for _, f := range crdFiles { // helm reads them in name order, as Glob returns them
		want = append(want, docs(readFile(t, f))...)
	}
	if crds, err := helm(t, "show", "crds", tgz); err != nil || !reflect.DeepEqual(docs(crds), want) {
		t.Fatalf("the package's CRDs differ from crds/ (%v)", err)
	}

	for name, values := range map[string][]string{"defaults": nil, "everything on": everythingOn} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			out, err := helm(t, append([]string{"install", "rl", tgz, "-n", ns, "--dry-run=server"}, values...)...)
			if err != nil {
				t.Fatalf("helm install --dry-run=server %s: %v\n%s", filepath.Base(tgz), err, out)
			}
			if !strings.Contains(out, "STATUS: pending-install") || !strings.Contains(out, "redislock "+chart.AppVersion+" is installed") {
				t.Fatalf("helm install --dry-run=server:\n%s", out)
			}
			serverDryRun(t, tgz, ns, values)
		})
	}
}

// crdUpgrade is the one CRD-upgrade command that the README and the
// chart's notes both give.
const crdUpgrade = "helm show crds CHART | kubectl apply --server-side --force-conflicts -f -"

// The README and NOTES.txt give the same CRD-upgrade command, and it works
// on CRDs that helm install created: without --force-conflicts the apply
// would conflict with Helm's field manager.
func TestHelmCRDUpgradeInstructionIsOneAndWorks(t *testing.T) {
	notes, err := helm(t, "install", "rl", chartDir(), "-n", "ops", "--dry-run=client")
	if err != nil {
		t.Fatalf("helm install --dry-run=client: %v\n%s", err, notes)
	}
	if !strings.Contains(notes, "\n  "+crdUpgrade+"\n") {
		t.Errorf("the chart's notes do not give %q:\n%s", crdUpgrade, notes[strings.Index(notes, "NOTES:"):])
	}
	if !strings.Contains(readFile(t, filepath.Join(repoRoot, "README.md")), "\n"+crdUpgrade+"\n") {
		t.Errorf("README.md does not give %q", crdUpgrade)
	}

	// A chart of one CRD, installed for real, then the same CRD changed.
	chart := t.TempDir()
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.crdupgrade.example}
spec:
  group: crdupgrade.example
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, description: DESCRIPTION}}
`
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: crdupgrade\nversion: 0.1.0\n")
	write("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: crdupgrade}\n")
	write("crds/widgets.yaml", strings.Replace(crd, "DESCRIPTION", "v1 of the chart", 1))
	ns := newNamespace(t)
	if out, err := helm(t, "install", "crdupgrade", chart, "-n", ns); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "crd", "widgets.crdupgrade.example", "--wait=false") })
	write("crds/widgets.yaml", strings.Replace(crd, "DESCRIPTION", "v2 of the chart", 1))
	crds, err := helm(t, "show", "crds", chart)
	if err != nil {
		t.Fatal(err)
	}
	// Without --force-conflicts the apply conflicts with Helm's field manager.
	if out, err := kubectlIn(t, crds, "apply", "--server-side", "-f", "-"); err == nil || !strings.Contains(out, "conflict") {
		t.Errorf("kubectl apply --server-side without --force-conflicts after helm install: %v, want a conflict\n%s", err, out)
	}
	kubectlArgs := strings.Fields(strings.TrimSpace(strings.SplitN(crdUpgrade, "|", 2)[1]))[1:]
	if out, err := kubectlIn(t, crds, kubectlArgs...); err != nil {
		t.Fatalf("%s after helm install: %v\n%s", crdUpgrade, err, out)
	}
	if got := mustKubectl(t, "get", "crd", "widgets.crdupgrade.example", "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}"); got != "v2 of the chart" {
		t.Errorf("the CRD's description is %q after the upgrade command, want v2's", got)
	}
}

// The chart's RBAC follows its modes: with watchNamespaces, Roles there
// and a ClusterRole without namespaced resources, the flag, and a webhook
// limited to those namespaces; with cert-manager certificates, neither the
// webhook configuration nor any Secret besides the locks'. (rbac_test.go
// runs the controller with these rules.)
func TestHelmRBACFollowsTheModes(t *testing.T) {
	// The grants of the controller's roles of kind, in ns ("": any).
	grantsOf := func(objs []map[string]any, kind, ns string) string {
		var out []string
		for _, o := range objs {
			name, _ := at(o, "metadata.name").(string)
			if o["kind"] == kind && strings.HasPrefix(name, "rl-redislock-controller") && (ns == "" || at(o, "metadata.namespace") == ns) {
				out = append(out, grants(o["rules"])...)
			}
		}
		return strings.Join(out, "\n")
	}
	objs := render(t, chartDir(), "--set", "watchNamespaces={shop,billing}")
	cluster := grantsOf(objs, "ClusterRole", "")
	for _, ns := range []string{"shop", "billing"} {
		role := grantsOf(objs, "Role", ns)
		for _, want := range []string{"redislock.io redislocks * watch", "redislock.io redisconnections * list", " secrets * get", "events.k8s.io events * create"} {
			if !strings.Contains(role, want) {
				t.Errorf("watchNamespaces: the Role in %s lacks %q:\n%s", ns, want, role)
			}
		}
	}
	for _, unwanted := range []string{"redislocks", " secrets ", "events", " redisconnections "} {
		if strings.Contains(cluster, unwanted) {
			t.Errorf("watchNamespaces: the ClusterRoles still grant %q:\n%s", unwanted, cluster)
		}
	}
	if args := fmt.Sprint(at(object(t, objs, "Deployment"), "spec.template.spec.containers.0.args")); !strings.Contains(args, "-watch-namespaces=shop,billing") {
		t.Errorf("watchNamespaces: args %s lack -watch-namespaces=shop,billing", args)
	}
	if terms := asYAML(at(object(t, objs, "MutatingWebhookConfiguration"), "webhooks.0.namespaceSelector")); !strings.Contains(terms, "operator: In") || !strings.Contains(terms, "- shop") {
		t.Errorf("watchNamespaces: the webhook's namespaceSelector does not limit it to them:\n%s", terms)
	}

	objs = render(t, chartDir(), "--set", "webhook.certs=cert-manager")
	if all := grantsOf(objs, "ClusterRole", "") + grantsOf(objs, "Role", ""); strings.Contains(all, "mutatingwebhookconfigurations") || strings.Contains(grantsOf(objs, "Role", "ops"), "secrets") {
		t.Errorf("cert-manager: the controller may still write the webhook configuration or its Secret:\n%s", all)
	}
	objs = render(t, chartDir())
	if role := grantsOf(objs, "Role", "ops"); !strings.Contains(role, " secrets rl-redislock-webhook-cert update") || !strings.Contains(role, "coordination.k8s.io leases * update") {
		t.Errorf("defaults: the release Role lacks the webhook Secret by name or the Lease:\n%s", role)
	}
}

// The tenancy policies (config/policy/tenancy.yaml): all three with their
// bindings by default; tenancy.secretAccessCheck=false leaves out only the
// Secret check's binding (its documented opt-out); tenancy.create=false,
// for a second release in the cluster, none of them.
func TestHelmTenancyPolicies(t *testing.T) {
	policies := func(objs []map[string]any) []string {
		var names []string
		for _, o := range objs {
			if k := o["kind"].(string); k == "ValidatingAdmissionPolicy" || k == "ValidatingAdmissionPolicyBinding" {
				// Not tenancy's: the agent's pod policies, the policy that
				// annotated pods have the agent (agent_required_test.go),
				// and the fencing policy (fencing_test.go).
				if n := at(o, "metadata.name").(string); !strings.HasPrefix(n, "redislock-agent-pod-") && !strings.HasSuffix(n, "-agent-required") && n != "redislock-fencing" {
					names = append(names, strings.TrimPrefix(k, "ValidatingAdmission")+"/"+n)
				}
			}
		}
		slices.Sort(names)
		return names
	}
	all := []string{
		"Policy/redislock-cluster-connection-namespaces", "Policy/redislock-global-scope", "Policy/redislock-secret-access",
		"PolicyBinding/redislock-cluster-connection-namespaces", "PolicyBinding/redislock-global-scope", "PolicyBinding/redislock-secret-access",
	}
	for _, tc := range []struct {
		name   string
		values []string
		want   []string
	}{
		{"by default", nil, all},
		{"without the Secret check", []string{"--set", "tenancy.secretAccessCheck=false"}, slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "PolicyBinding/redislock-secret-access" })},
		{"created by another release", []string{"--set", "tenancy.create=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := policies(render(t, chartDir(), tc.values...)); !slices.Equal(got, tc.want) {
				t.Errorf("rendered %v, want %v", got, tc.want)
			}
		})
	}
}

// charts/redislock-crds has the redislock chart's version and appVersion
// (the two are installed side by side), marks its CRDs keep unless told
// not to, and its notes say what uninstall does. (test/cluster upgrades a
// CRD with it, and checks that uninstall keeps them.)
func TestCRDsChartFollowsTheMainChart(t *testing.T) {
	var main, crds struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir(), "Chart.yaml"))), &main); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(crdsChartDir(), "Chart.yaml"))), &crds); err != nil {
		t.Fatal(err)
	}
	if crds != main {
		t.Errorf("charts/redislock-crds is %+v, charts/redislock %+v: bump them together", crds, main)
	}
	annotations := func(set ...string) []any {
		out, err := helm(t, append([]string{"template", "redislock-crds", crdsChartDir()}, set...)...)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		var policies []any
		for _, d := range docs(out) {
			policies = append(policies, at(d, "metadata.annotations[helm.sh/resource-policy]"))
		}
		return policies
	}
	if got := annotations(); !reflect.DeepEqual(got, []any{"keep", "keep", "keep"}) {
		t.Errorf("defaults: the CRDs' helm.sh/resource-policy are %v, want keep on each of 3", got)
	}
	if got := annotations("--set", "keep=false"); !reflect.DeepEqual(got, []any{nil, nil, nil}) {
		t.Errorf("keep=false: the CRDs' helm.sh/resource-policy are %v, want none", got)
	}
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, "helm uninstall redislock-crds leaves them (and your RedisLocks) in place"},
		{[]string{"--set", "keep=false"}, "helm uninstall redislock-crds deletes them, and with them every RedisLock"},
	} {
		// --take-ownership: the test API server has the CRDs, without Helm's labels.
		out, err := helm(t, append([]string{"install", "redislock-crds", crdsChartDir(), "--dry-run=client", "--take-ownership"}, c.set...)...)
		if err != nil {
			t.Fatalf("helm install --dry-run=client: %v\n%s", err, out)
		}
		if !strings.Contains(strings.Join(strings.Fields(out), " "), c.want) {
			t.Errorf("%v: the notes do not say %q:\n%s", c.set, c.want, out[strings.Index(out, "NOTES:"):])
		}
	}
}

// Two releases of one name in two namespaces (what docs/install.md's
// several installations must avoid) collide on the release's
// cluster-scoped objects, and helm says so: the second install fails with
// the ownership error the doc quotes, and leaves the first alone. Each
// release's own name avoids it. (No webhook and no hooks: nothing here may
// call a Service's cluster IP.)
func TestHelmTwoReleasesOfOneNameCollideClearly(t *testing.T) {
	installThirdPartyCRDs(t)
	a, b := newNamespace(t), newNamespace(t)
	values := []string{"--no-hooks", "--set", "webhook.enabled=false"}
	install := func(name, ns string, more ...string) (string, error) {
		t.Cleanup(func() { _, _ = helm(t, "uninstall", name, "-n", ns) })
		return helm(t, append(append([]string{"install", name, chartDir(), "-n", ns}, values...), more...)...)
	}
	if out, err := install("dup", a); err != nil {
		t.Fatalf("the first release: %v\n%s", err, out)
	}
	out, err := install("dup", b, "--set", "agentRole.create=false", "--set", "tenancy.create=false", "--set", "fencing.create=false")
	if err == nil || !strings.Contains(out, "exists and cannot be imported into the current release: invalid ownership metadata") {
		t.Fatalf("a second release of the same name in another namespace: %v; want the ownership error docs/install.md quotes:\n%s", err, out)
	}
	if out, err := install("dup-b", b, "--set", "agentRole.create=false", "--set", "tenancy.create=false", "--set", "fencing.create=false"); err != nil {
		t.Fatalf("a second release with a name of its own: %v\n%s", err, out)
	}
}

// The agent's default pod policy comes with agentRole.create, and
// agentRole.podGuard=false leaves it out (and it alone).
func TestHelmAgentPodGuardIsOptional(t *testing.T) {
	names := func(objs []map[string]any) []string {
		var ns []string
		for _, o := range objs {
			if n := at(o, "metadata.name").(string); strings.HasPrefix(n, "redislock-agent-pod-") && strings.HasPrefix(o["kind"].(string), "ValidatingAdmissionPolicy") {
				ns = append(ns, o["kind"].(string)+"/"+n)
			}
		}
		slices.Sort(ns)
		return ns
	}
	guard := []string{"ValidatingAdmissionPolicy/redislock-agent-pod-guard", "ValidatingAdmissionPolicyBinding/redislock-agent-pod-guard"}
	label := []string{"ValidatingAdmissionPolicy/redislock-agent-pod-label", "ValidatingAdmissionPolicyBinding/redislock-agent-pod-label"}
	for _, tc := range []struct {
		name   string
		values []string
		want   []string
	}{
		{"by default", nil, slices.Sorted(slices.Values(append(slices.Clone(guard), label...)))},
		{"without the guard", []string{"--set", "agentRole.podGuard=false"}, label},
		{"without the agent's roles", []string{"--set", "agentRole.create=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(render(t, chartDir(), tc.values...)); !slices.Equal(got, tc.want) {
				t.Errorf("rendered %v, want %v", got, tc.want)
			}
		})
	}
}
