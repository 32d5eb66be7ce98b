// Package kubeconfig gives the controller and the agent one -kubeconfig
// flag and one way to turn it into the API server's client config.
//
// It looks where controller-runtime's ctrl.GetConfig looks, in the same
// order (the flag, $KUBECONFIG, the in-cluster config, ~/.kube/config), but
// reads the subcommands' own -kubeconfig flag (ctrl.GetConfig reads only
// the global flag set's), logs nothing while it looks, and, where there is
// no config at all, says where it looked (ErrNoConfig).
package kubeconfig

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoConfig means none of the places Load looks holds a config.
var ErrNoConfig = errors.New("kubeconfig: no API server to talk to: pass -kubeconfig FILE, set $KUBECONFIG, run in a pod (the in-cluster config), or write ~/.kube/config")

// Flag registers -kubeconfig on fs and returns where fs.Parse puts its
// value, for Load.
func Flag(fs *flag.FlagSet) *string {
	return fs.String("kubeconfig", "", "path of a kubeconfig file to reach the API server with (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
}

// Load returns the client config of the kubeconfig file at path (its
// current context), or, with path empty, of $KUBECONFIG, else the
// in-cluster config, else ~/.kube/config; ErrNoConfig when there is none.
// Client-side rate limiting is off unless the file sets a QPS, as
// ctrl.GetConfig leaves it: the API server's priority and fairness limits
// the client instead.
func Load(path string) (*rest.Config, error) {
	cfg, err := find(path)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

func find(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		} else if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("kubeconfig: the in-cluster config: %w", err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, ErrNoConfig
	case err != nil:
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
