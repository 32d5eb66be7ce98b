package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redisconn"
)

// k8s is a live client of the test API server: assertions read through it,
// not through the manager's cache.
var k8s client.Client

// clusterID is the test API server's cluster identity.
var clusterID string

// apiConfig reaches the test API server, for tests that start a manager
// of their own.
var apiConfig *rest.Config

// lockIn returns the prefix of the Redis lock names of ns's RedisLocks of
// scope Cluster: "<clusterID>/<ns>".
func lockIn(ns string) string { return clusterID + "/" + ns }

// resync is the reconciler's resync period in these tests: longer than
// the 1s a holder change may take to show, so a test that sees one in time
// saw the pub/sub path work.
const resync = 3 * time.Second

func TestMain(m *testing.M) {
	testenv.Main(filepath.Join("..", ".."), &envtest.Environment{}, true, func(cfg *rest.Config) (int, error) { return run(m, cfg) })
}

func run(m *testing.M, cfg *rest.Config) (int, error) {
	apiConfig = cfg
	scheme, err := testenv.Scheme()
	if err != nil {
		return 0, err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	if clusterID, err = redisconn.ClusterID(context.Background(), k8s); err != nil {
		return 0, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	// The cache as the controller's command sets it up: the RedisLocks
	// without a class.
	noClass, err := controller.ClassSelector("")
	if err != nil {
		return 0, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha1.RedisLock{}: {Label: noClass, Transform: controller.StripManagedFields}}}})
	if err != nil {
		return 0, err
	}
	r := &controller.RedisLockReconciler{Client: recordingClient{mgr.GetClient()}, APIReader: recordingAPIReader{mgr.GetAPIReader()}, Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: resync, ClusterID: clusterID}
	if err := r.SetupWithManager(mgr); err != nil {
		return 0, err
	}
	protection := &controller.ConnectionProtection{Client: recordingClient{mgr.GetClient()}, Recorder: mgr.GetEventRecorder("redislock-controller"), Finalizer: controller.ConnectionFinalizer("", nil)}
	if err := protection.SetupWithManager(mgr); err != nil {
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
