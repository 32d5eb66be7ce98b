package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
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
