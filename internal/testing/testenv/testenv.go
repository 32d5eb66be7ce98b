// Package testenv runs tests and the demo against a local control plane
// (envtest): it finds the binaries hack/ensure-tools.sh builds, starts and
// stops the API server around a test binary, gives a client and a kubectl
// of it, points the generated webhook configuration at a local controller,
// and creates pods the webhook has injected the agent into.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/rung"
)

// AssetsDir returns the directory of kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS if set, else the one directory bin/k8s/*/ below root
// (the repository root) that holds a kube-apiserver, as
// hack/ensure-tools.sh builds it. The error says how to get them.
func AssetsDir(root string) (string, error) {
	p, err := Tool(root, "KUBEBUILDER_ASSETS", filepath.Join("bin", "k8s", "*", "kube-apiserver"))
	if err != nil {
		return "", err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		return p, nil
	}
	return filepath.Dir(p), nil
}

// Tool finds something hack/ensure-tools.sh builds: the path in $env if
// set (it must exist), else the one match of glob below root. The error
// says how to get it.
func Tool(root, env, glob string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	pattern := filepath.Join(root, glob)
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("nothing matches %s and %s is unset; run `make test`, which builds the tools into bin/ (hack/ensure-tools.sh)", pattern, env)
	case 1:
		return filepath.Abs(matches[0])
	default:
		return "", fmt.Errorf("several versions match %s: %s; set %s to the one to use", pattern, strings.Join(matches, ", "), env)
	}
}

// Main runs a test binary's tests against a real API server: it starts env
// (setting its BinaryAssetsDirectory from AssetsDir(root), and, when
// withCRDs, the CRDs of config/crd/bases below root), calls run with its
// config, stops env, and exits with run's code. An error from any step is
// printed and exits with 1. In the unit rung (go test -short) it starts
// nothing and exits at once, its package's tests skipped.
func Main(root string, env *envtest.Environment, withCRDs bool, run func(cfg *rest.Config) (int, error)) {
	if !rung.Servers() {
		fmt.Println("unit rung (go test -short): skipped, these tests need an API server")
		os.Exit(0)
	}
	code, err := start(root, env, withCRDs, run)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// ControlPlaneStartTimeout is how long the suites and the demo wait for
// etcd and kube-apiserver to start: envtest's default of 20 s is less than
// what a cold, loaded 2-core machine may take.
const ControlPlaneStartTimeout = 2 * time.Minute

func start(root string, env *envtest.Environment, withCRDs bool, run func(cfg *rest.Config) (int, error)) (int, error) {
	assets, err := AssetsDir(root)
	if err != nil {
		return 0, err
	}
	env.BinaryAssetsDirectory = assets
	if env.ControlPlaneStartTimeout == 0 {
		env.ControlPlaneStartTimeout = ControlPlaneStartTimeout
	}
	if env.ControlPlaneStopTimeout == 0 {
		env.ControlPlaneStopTimeout = time.Minute
	}
	if withCRDs {
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start may have left etcd or kube-apiserver running
		return 0, fmt.Errorf("start envtest with the binaries in %s: %w", assets, err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	return run(cfg)
}

// Scheme returns a scheme with client-go's types and RedisLocks.
func Scheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// Client returns a client of cfg's API server that knows client-go's types
// and RedisLocks (Scheme), reading straight from the server (no cache).
func Client(cfg *rest.Config) (client.Client, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// LocalWebhook is the injecting webhook as a `redislock controller` run as
// a local process serves it to a local API server.
type LocalWebhook struct {
	// Manifest is the webhook configuration to install, as YAML: the one
	// `make manifests` generates (config/webhook/manifests.yaml), renamed,
	// calling https://127.0.0.1:port instead of the in-cluster Service,
	// and limited to the pods of one namespace.
	Manifest []byte
	// Args are the controller's flags that serve it on that port, with a
	// certificate for 127.0.0.1 that the controller issues itself and
	// whose CA it sets as the configuration's caBundle.
	Args []string
}

// NewLocalWebhook returns the webhook configuration of root (the
// repository root) as name, for the pods of namespace, on a free loopback
// port, the controller keeping its certificate in certDir.
func NewLocalWebhook(root, name, namespace, certDir string) (LocalWebhook, error) {
	port, err := proc.FreePort()
	if err != nil {
		return LocalWebhook{}, err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return LocalWebhook{}, err
	}
	var wc admissionv1.MutatingWebhookConfiguration
	if err := yaml.Unmarshal(raw, &wc); err != nil {
		return LocalWebhook{}, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
	}
	wc.Name = name
	for i := range wc.Webhooks {
		w := &wc.Webhooks[i]
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
			return LocalWebhook{}, fmt.Errorf("config/webhook/manifests.yaml: webhook %s has no service path", w.Name)
		}
		url := "https://127.0.0.1:" + strconv.Itoa(port) + *w.ClientConfig.Service.Path
		w.ClientConfig = admissionv1.WebhookClientConfig{URL: &url}
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}
	}
	manifest, err := yaml.Marshal(&wc)
	if err != nil {
		return LocalWebhook{}, err
	}
	return LocalWebhook{Manifest: manifest, Args: []string{"-webhook-port=" + strconv.Itoa(port), "-webhook-cert-dir=" + certDir,
		"-webhook-hosts=127.0.0.1", "-webhook-configuration=" + name}}, nil
}
