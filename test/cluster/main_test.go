package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// state is the part of hack/cluster's cluster.json the tests read.
type state struct {
	Kubeconfig string `json:"kubeconfig"`
	RedisAddr  string `json:"redisAddr"`
	AppImage   string `json:"appImage"`
	// PythonImage has the host's python3, for examples/python-worker.
	PythonImage string `json:"pythonImage"`
}

var (
	repoRoot string
	cluster  state
	kubectl  testenv.Kubectl
	client   *kubernetes.Clientset
	rl       crclient.Client // for RedisLocks
	helmBin  string
	skipWhy  string
)

const upDownTimeout = 10 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return fail(err)
	}
	repoRoot = root
	mode := os.Getenv("REDISLOCK_CLUSTER")
	switch mode {
	case "":
		skipWhy = "REDISLOCK_CLUSTER is unset: these tests need a real cluster (see the package doc)"
		return m.Run()
	case "up", "start":
	default:
		return fail(fmt.Errorf("REDISLOCK_CLUSTER=%s: want up or start", mode))
	}
	if mode == "start" {
		if err := clusterCmd("up"); err != nil {
			return fail(errors.Join(err, clusterCmd("down")))
		}
		defer func() {
			if err := clusterCmd("down"); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	if err := connect(); err != nil {
		return fail(err)
	}
	return m.Run()
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "test/cluster:", err)
	return 1
}

// clusterCmd runs `go run ./hack/cluster <verb>`, its timeline on stderr.
func clusterCmd(verb string) error {
	ctx, cancel := context.WithTimeout(context.Background(), upDownTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/cluster", verb)
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(os.Stderr, "test/cluster: hack/cluster %s took %.1fs\n", verb, time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("hack/cluster %s: %w", verb, err)
	}
	return nil
}

// connect reads the cluster's state and makes the clients.
func connect() error {
	dir := os.Getenv("REDISLOCK_CLUSTER_DIR")
	if dir == "" {
		dir = "/tmp/redislock-cluster"
	}
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return fmt.Errorf("no cluster is up (%w): run `go run ./hack/cluster up` or set REDISLOCK_CLUSTER=start", err)
	}
	if err := json.Unmarshal(b, &cluster); err != nil {
		return err
	}
	assets, err := testenv.AssetsDir(repoRoot)
	if err != nil {
		return err
	}
	kubectl = testenv.Kubectl{Path: filepath.Join(assets, "kubectl"), Kubeconfig: cluster.Kubeconfig, Dir: repoRoot}
	if helmBin, err = testenv.Tool(repoRoot, "HELM", filepath.Join("bin", "helm-*")); err != nil {
		return err
	}
	cache, err := os.MkdirTemp("", "test-cluster-")
	if err != nil {
		return err
	}
	// kubectl's and helm's caches stay out of $HOME.
	for k, v := range map[string]string{"KUBECACHEDIR": "kube", "HELM_CACHE_HOME": "helm-cache", "HELM_CONFIG_HOME": "helm-config", "HELM_DATA_HOME": "helm-data"} {
		if err := os.Setenv(k, filepath.Join(cache, v)); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		return err
	}
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		return err
	}
	ctrllog.SetLogger(logr.Discard()) // the client logs nothing worth reading here
	rl, err = crclient.New(cfg, crclient.Options{Scheme: scheme})
	return err
}

// needCluster skips t unless the tests were asked to run.
func needCluster(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}
