package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubectlTimeout bounds every kubectl run.
const KubectlTimeout = time.Minute

// Kubectl is kubectl as a user runs it against one API server.
type Kubectl struct {
	// Path is the kubectl binary (the one in AssetsDir).
	Path string
	// Kubeconfig is the file it connects with.
	Kubeconfig string
	// Dir is the directory it runs in, against which relative paths in
	// its arguments are read.
	Dir string
}

// AdminKubectl adds the user name, in group system:masters, to env's
// running API server, writes a kubeconfig for it to dir/kubeconfig, and
// returns the kubectl next to kube-apiserver as that user, run in root. The
// error says how to get a missing kubectl.
func AdminKubectl(env *envtest.Environment, name, dir, root string) (Kubectl, error) {
	k := Kubectl{Path: filepath.Join(env.BinaryAssetsDirectory, "kubectl"), Kubeconfig: filepath.Join(dir, "kubeconfig"), Dir: root}
	if _, err := os.Stat(k.Path); err != nil {
		return Kubectl{}, fmt.Errorf("no kubectl next to kube-apiserver in %s (%w); run `make test`, which builds the control-plane binaries", env.BinaryAssetsDirectory, err)
	}
	user, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return Kubectl{}, fmt.Errorf("add the user %s: %w", name, err)
	}
	cfg, err := user.KubeConfig()
	if err != nil {
		return Kubectl{}, fmt.Errorf("make the kubeconfig of %s: %w", name, err)
	}
	return k, os.WriteFile(k.Kubeconfig, cfg, 0o600)
}

// Run runs kubectl with args and stdin, within KubectlTimeout and ctx, and
// returns its combined output. An error names the command, and says when it
// timed out.
func (k Kubectl) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, KubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	cmd.Dir = k.Dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("kubectl %s: timed out after %v: %w", strings.Join(args, " "), KubectlTimeout, err)
	case err != nil:
		err = fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), err
}
