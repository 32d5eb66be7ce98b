package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/controllers"
	"github.com/redislock/redislock/internal/testenv"
)

// k8s is a live client of the test API server: assertions read through it,
// not through the manager's cache.
var k8s client.Client

// resync is the reconciler's resync period in these tests: longer than
// the 1s a holder change may take to show, so a test that sees one in time
// saw the pub/sub path work.
const resync = 3 * time.Second

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	assets, err := testenv.AssetsDir("..")
	if err != nil {
		return 0, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		return 0, fmt.Errorf("start envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return 0, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return 0, err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return 0, err
	}
	r := &controllers.RedisLockReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: resync}
	if err := r.SetupWithManager(mgr); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		return code, fmt.Errorf("manager: %w", err)
	}
	return code, nil
}
