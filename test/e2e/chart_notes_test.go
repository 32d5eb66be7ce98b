package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// The chart's notes follow the release's options: the RedisLock they tell
// the user to apply is valid (the API server takes it, dry run) and is one
// this release reconciles (its namespace among the controller's
// -watch-namespaces, its labels chosen by -lock-class); the RoleBinding
// command works and names a ClusterRole the release installs, in a
// namespace whose pods the webhook injects; the rollout command is there
// exactly when webhook.waitJob is off, and names the release's Deployment.
func TestChartNotesFollowTheOptions(t *testing.T) {
	for _, ns := range []string{"shop", "billing"} {
		_, _ = kubectl(t, "create", "namespace", ns)
	}
	cases := []struct {
		name string
		set  []string
	}{
		{"defaults", nil},
		{"watchNamespaces and lockClass", []string{"--set", "watchNamespaces={shop,billing}", "--set", "lockClass=prod"}},
		{"the release's namespace first, a RedisLock election", []string{"--set", "watchNamespaces={ops,billing}",
			"--set", "leaderElection.mode=redislock", "--set", "redis.addrs={redis.redis.svc:6379}"}},
		{"one namespace, no wait Job, a namespace selector", []string{"--set", "watchNamespaces={shop}", "--set", "webhook.waitJob.enabled=false",
			"--set", "webhook.namespaceSelector.matchLabels.team=a"}},
		{"no agent role", []string{"--set", "agentRole.create=false"}},
		{"no webhook", []string{"--set", "webhook.enabled=false"}},
		{"plain HTTP metrics", []string{"--set", "metrics.secure=false"}},
		{"connections only", []string{"--set", "redisAccess.allowInline=false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"install", "rl", chartDir(), "-n", "ops", "--dry-run=client"}, tc.set...)
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			i := strings.Index(out, "\nNOTES:\n")
			if i < 0 {
				t.Fatalf("no NOTES in:\n%s", out)
			}
			notes := out[i+len("\nNOTES:\n"):]
			objs := docs(out[:i])
			checkNotes(t, notes, objs)
		})
	}
}

// checkNotes checks notes against the objects the release renders.
func checkNotes(t *testing.T, notes string, objs []map[string]any) {
	t.Helper()
	var deploy, webhookCfg map[string]any
	clusterRoles := sets.New[string]()
	for _, o := range objs {
		switch o["kind"] {
		case "Deployment":
			deploy = o
		case "MutatingWebhookConfiguration":
			webhookCfg = o
		case "ClusterRole":
			clusterRoles.Insert(o["metadata"].(map[string]any)["name"].(string))
		}
	}
	if deploy == nil {
		t.Fatal("the release renders no Deployment")
	}
	args := containerArgs(deploy, "controller")
	// The metrics line says HTTPS, and names a reader role the release
	// makes, exactly when the controller serves them so.
	reader := regexp.MustCompile(`HTTPS to service\s+accounts bound to the ClusterRole (\S+)-metrics-reader\.`).FindStringSubmatch(notes)
	if secure := slices.Contains(args, "-metrics-secure"); secure != (reader != nil) {
		t.Errorf("the controller's -metrics-secure is %v, but the notes' metrics line says otherwise:\n%s", secure, notes)
	} else if reader != nil && !clusterRoles.Has(reader[1]+"-metrics-reader") {
		t.Errorf("the notes name the ClusterRole %s-metrics-reader, which the release does not make", reader[1])
	}
	flagValue := func(name string) (string, bool) {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
				return v, true
			}
		}
		return "", false
	}

	// The RedisLock: valid, and reconciled by this release.
	m := regexp.MustCompile(`(?s)kubectl apply -f - <<'YAML'\n(.*?)\n  YAML\n`).FindStringSubmatch(notes)
	if m == nil {
		t.Fatalf("no `kubectl apply -f - <<'YAML'` block in the notes:\n%s", notes)
	}
	lockYAML := strings.ReplaceAll("\n"+m[1], "\n  ", "\n")
	if out, err := kubectlIn(t, lockYAML, "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Errorf("the notes' RedisLock is refused: %v\n%s\n%s", err, out, lockYAML)
	}
	var lock struct {
		Metadata struct {
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(lockYAML), &lock); err != nil {
		t.Fatal(err)
	}
	ns := lock.Metadata.Namespace
	if watched, ok := flagValue("watch-namespaces"); ok && !slices.Contains(strings.Split(watched, ","), ns) {
		t.Errorf("the notes' RedisLock is in %q; the controller reconciles -watch-namespaces=%s only", ns, watched)
	}
	class, _ := flagValue("lock-class")
	sel, err := controller.ClassSelector(class)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(lock.Metadata.Labels)) {
		t.Errorf("the notes' RedisLock has labels %v; the controller (-lock-class=%q) reconciles %v only", lock.Metadata.Labels, class, sel)
	}
	if want := "kubectl get redislocks "; !strings.Contains(notes, want+"-A\n") && !strings.Contains(notes, want+"-n "+ns+"\n") {
		t.Errorf("the notes do not list the RedisLocks with -A or -n %s:\n%s", ns, notes)
	}

	// The rollout command, exactly when the wait Job is off.
	rollout := regexp.MustCompile(`kubectl -n (\S+) rollout status deployment/(\S+)`).FindStringSubmatch(notes)
	meta := deploy["metadata"].(map[string]any)
	waitJob := findKind(objs, "Job") != nil
	switch {
	case webhookCfg == nil || waitJob:
		if rollout != nil {
			t.Errorf("the notes ask for %q, which the webhook-wait Job (or no webhook) makes unneeded", rollout[0])
		}
	case rollout == nil:
		t.Errorf("with webhook.waitJob off, the notes do not say to wait for the rollout:\n%s", notes)
	case rollout[1] != "ops" || rollout[2] != meta["name"]:
		t.Errorf("the notes wait for deployment %s/%s; the release's is ops/%s", rollout[1], rollout[2], meta["name"])
	}

	// The agent: a RoleBinding that works, in a namespace the webhook injects.
	rb := regexp.MustCompile(`\n  (kubectl create rolebinding .*)\n`).FindStringSubmatch(notes)
	switch {
	case webhookCfg == nil:
		if strings.Contains(notes, "redislock.io/lock:") {
			t.Errorf("without the webhook the notes still tell to annotate pods:\n%s", notes)
		}
		return
	case !clusterRoles.Has("redislock-agent"):
		if rb != nil {
			t.Errorf("the notes bind the ClusterRole redislock-agent, which the release does not install: %s", rb[1])
		}
	case rb == nil:
		t.Errorf("the notes give no `kubectl create rolebinding` for the agent:\n%s", notes)
	default:
		cmds, err := testenv.Commands(rb[1])
		if err != nil || len(cmds) != 1 {
			t.Fatalf("%s: %v", rb[1], err)
		}
		out, err := kubectl(t, append(cmds[0][1:], "--dry-run=server", "-o", "yaml")...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", rb[1], err, out)
		}
		var got struct {
			Metadata struct{ Namespace string }  `json:"metadata"`
			RoleRef  struct{ Kind, Name string } `json:"roleRef"`
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Metadata.Namespace != ns || got.RoleRef.Kind != "ClusterRole" || !clusterRoles.Has(got.RoleRef.Name) {
			t.Errorf("%s makes a RoleBinding in %q to %s %q; want one in %q to a ClusterRole of the release (%v)",
				rb[1], got.Metadata.Namespace, got.RoleRef.Kind, got.RoleRef.Name, ns, sets.List(clusterRoles))
		}
	}
	// The webhook injects pods in ns, once it has the labels the notes name.
	nsLabels := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, l := range regexp.MustCompile(`in a namespace labelled ((?:\S+=\S+ )+)\(webhook.namespaceSelector\)`).FindAllStringSubmatch(notes, -1) {
		for _, kv := range strings.Fields(l[1]) {
			k, v, _ := strings.Cut(kv, "=")
			nsLabels[k] = v
		}
	}
	for _, w := range webhookCfg["webhooks"].([]any) {
		raw, err := yaml.Marshal(w.(map[string]any)["namespaceSelector"])
		if err != nil {
			t.Fatal(err)
		}
		var ls metav1.LabelSelector
		if err := yaml.Unmarshal(raw, &ls); err != nil {
			t.Fatal(err)
		}
		s, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Matches(nsLabels) {
			t.Errorf("the webhook's namespaceSelector %v does not match namespace %s labelled %v, where the notes put the workload", s, ns, nsLabels)
		}
	}
}
