package kubeconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKubeconfig writes a kubeconfig whose current context reaches server,
// and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters:
- name: made-up
  cluster: {server: "` + server + `"}
users:
- name: someone
  user: {token: not-a-real-token}
contexts:
- name: made-up
  context: {cluster: made-up, user: someone}
current-context: made-up
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// An explicit path wins over $KUBECONFIG; without one, $KUBECONFIG is read
// as ctrl.GetConfig reads it. Both leave client-side rate limiting off.
func TestLoadReadsTheFileGiven(t *testing.T) {
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "https://from-env.example:6443"))
	cases := []struct {
		name, path, wantHost string
	}{
		{"path given", writeKubeconfig(t, "https://from-flag.example:6443"), "https://from-flag.example:6443"},
		{"no path", "", "https://from-env.example:6443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("Host %q, want %q", cfg.Host, tc.wantHost)
			}
			if cfg.BearerToken != "not-a-real-token" {
				t.Errorf("BearerToken %q, want the file's", cfg.BearerToken)
			}
			if cfg.QPS != -1 {
				t.Errorf("QPS %v, want -1 (no client-side rate limit)", cfg.QPS)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// With no file given, no $KUBECONFIG, no pod and no ~/.kube/config, Load
// says where it looked, naming the flag, instead of client-go's "try
// setting KUBERNETES_MASTER".
func TestLoadWithoutAnyConfigSaysWhereItLooked(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("HOME", t.TempDir())
	_, err := Load("")
	if !errors.Is(err, ErrNoConfig) || !strings.Contains(err.Error(), "-kubeconfig") || !strings.Contains(err.Error(), "~/.kube/config") {
		t.Fatalf("Load without any config: %v; want ErrNoConfig naming -kubeconfig and ~/.kube/config", err)
	}
}
