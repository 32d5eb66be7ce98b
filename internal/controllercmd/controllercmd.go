// Package controllercmd runs the RedisLock controller: the `redislock
// controller` subcommand.
package controllercmd

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/controllers"
)

// The controller's own leader election (-leader-elect) uses a Lease.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Run parses args and runs the controller until ctx ends.
func Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	metricsAddr := fs.String("metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	leaderElect := fs.Bool("leader-elect", false, "elect one active controller among replicas (a Lease in the controller's namespace)")
	resync := fs.Duration("resync", 0, "longest time between two inspections of a lock (default 30s)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("controller: kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		LeaderElection:         *leaderElect,
		LeaderElectionID:       "redislock-controller",
	})
	if err != nil {
		return fmt.Errorf("controller: manager: %w", err)
	}
	r := &controllers.RedisLockReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: *resync}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: setup: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
