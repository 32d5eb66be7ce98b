package testenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// root is the repository root; kubectl runs there as the admin of the API
// server TestMain starts.
const root = "../../.."

var kubectl testenv.Kubectl

func TestMain(m *testing.M) {
	env := &envtest.Environment{}
	testenv.Main(root, env, true, func(*rest.Config) (int, error) {
		dir, err := os.MkdirTemp("", "testenv-")
		if err != nil {
			return 0, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if kubectl, err = testenv.AdminKubectl(env, "testenv-admin", dir, root); err != nil {
			return 0, err
		}
		return m.Run(), nil
	})
}

// kubectl runs in Dir (relative paths resolve there), with stdin, and a
// failure names the command and carries kubectl's own message.
func TestKubectlRunsInDirAndNamesAFailedCommand(t *testing.T) {
	ctx := context.Background()
	if out, err := kubectl.Run(ctx, "", "apply", "--dry-run=server", "-f", filepath.Join("config", "samples", "redislock_standalone.yaml"), "-n", "default"); err != nil {
		t.Fatalf("a relative path in Dir: %v\n%s", err, out)
	}
	out, err := kubectl.Run(ctx, "{apiVersion: v1, kind: Namespace, metadata: {name: Not_DNS}}", "create", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "kubectl create -f -") || !strings.Contains(out, "Not_DNS") {
		t.Fatalf("an invalid object from stdin: %v\n%s; want an error naming the command and kubectl's message", err, out)
	}
}

// The local webhook configuration is accepted by the API server, calls
// the port the controller flags serve on, and only for the one namespace.
func TestLocalWebhookPairsTheConfigurationWithTheControllerFlags(t *testing.T) {
	w, err := testenv.NewLocalWebhook(root, "local-injector", "apps", "/certs")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl.Run(context.Background(), string(w.Manifest), "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var port string
	for _, a := range w.Args {
		if p, ok := strings.CutPrefix(a, "-webhook-port="); ok {
			port = p
		}
	}
	for _, want := range []string{fmt.Sprintf("url: https://127.0.0.1:%s/", port), "kubernetes.io/metadata.name: apps", "name: local-injector"} {
		if port == "" || !strings.Contains(string(w.Manifest), want) {
			t.Errorf("the manifest lacks %q (flags %v):\n%s", want, w.Args, w.Manifest)
		}
	}
	if got := strings.Join(w.Args, " "); !strings.Contains(got, "-webhook-cert-dir=/certs") || !strings.Contains(got, "-webhook-hosts=127.0.0.1") || !strings.Contains(got, "-webhook-configuration=local-injector") {
		t.Errorf("flags %v", w.Args)
	}
}
