// Package kubeconfig gives the controller and the agent one -kubeconfig
// flag and one way to turn it into the API server's client config.
//
// controller-runtime's ctrl.GetConfig reads a -kubeconfig flag only from the
// global flag set, which the subcommands do not parse; this package reads
// the subcommands' own flag instead and otherwise falls back to
// ctrl.GetConfig, so $KUBECONFIG, the in-cluster config and ~/.kube/config
// work as before.
package kubeconfig

import (
	"flag"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Flag registers -kubeconfig on fs and returns where fs.Parse puts its
// value, for Load.
func Flag(fs *flag.FlagSet) *string {
	return fs.String("kubeconfig", "", "path of a kubeconfig file to reach the API server with (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
}

// Load returns the client config of the kubeconfig file at path (its
// current context), or, with path empty, the one ctrl.GetConfig finds. Either
// way client-side rate limiting is off unless the file sets a QPS, as
// ctrl.GetConfig leaves it: the API server's priority and fairness limits
// the client instead.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}
