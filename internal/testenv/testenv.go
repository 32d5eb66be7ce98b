// Package testenv finds the control-plane binaries that envtest runs.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AssetsDir returns the directory of kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS if set, else the one directory bin/k8s/*/ below root
// (the repository root) that holds a kube-apiserver, as
// hack/ensure-tools.sh builds it. The error says how to get them.
func AssetsDir(root string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s holds no kube-apiserver: %w", dir, err)
		}
		return dir, nil
	}
	pattern := filepath.Join(root, "bin", "k8s", "*", "kube-apiserver")
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no control-plane binaries: nothing matches %s and KUBEBUILDER_ASSETS is unset; run `make test`, which builds kube-apiserver, etcd and kubectl into bin/k8s/<version>/", pattern)
	case 1:
		return filepath.Abs(filepath.Dir(matches[0]))
	default:
		return "", fmt.Errorf("several control-plane versions match %s: %s; set KUBEBUILDER_ASSETS to the one to use", pattern, strings.Join(matches, ", "))
	}
}
