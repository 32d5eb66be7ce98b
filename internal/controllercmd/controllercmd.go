// Package controllercmd runs the RedisLock controller: the `redislock
// controller` subcommand.
package controllercmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/kubeconfig"
	"github.com/redislock/redislock/internal/metricsauth"
	"github.com/redislock/redislock/internal/webhookcert"
	"github.com/redislock/redislock/pkg/mgrelection"
	"github.com/redislock/redislock/pkg/redisconn"
)

// The controller's own leader election, in its namespace (redislock-system
// here; kustomize and the Helm chart put the Role in the namespace they
// install to): a Lease with -leader-elect, or with
// -leader-election-redislock a RedisLock, whose election events are core
// events.
// client-go's Lease lock gets, creates and updates its Lease, nothing more.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=redislock-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=redislock-system,resources=events,verbs=create;patch

// metricsOptions serves /metrics on addr: plain HTTP, or, secure, HTTPS
// for a caller the API server authenticates and authorizes, as the
// kubebuilder scaffold does (with metricsauth, not controller-runtime's
// filters, whose k8s.io/apiserver would add 26 MB to the image every
// injected agent runs).
func metricsOptions(addr string, secure bool) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if secure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.FilterProvider(clock.RealClock{})
	}
	return opts
}

// Run parses args and runs the controller until ctx ends.
func Run(ctx context.Context, args []string) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	return run(ctx, c)
}

// gcPercent is the controller's GOGC when its environment sets none: a
// collection starts once the heap has grown by half the live data, not by
// all of it (Go's default of 100). At 10,000 RedisLocks, one redis-server,
// it kept the peak RSS at 137.7 MiB against 177.5 MiB, Ready in 56.4 s
// against 52.6 s (TestControllerBenchmark, 2-core VM; docs/cost.md).
const gcPercent = 50

// collectAtGCPercent sets the collector's target to gcPercent unless
// lookup finds GOGC, which the runtime has then read.
func collectAtGCPercent(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// run runs the controller as c says until ctx ends: the manager, its
// leader election, the controllers and, with an agent image, the webhook.
func run(ctx context.Context, c config) error {
	collectAtGCPercent(os.LookupEnv)
	redisconn.RouteRedisLogs(c.log)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := kubeconfig.Load(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	opts := c.managerOptions(scheme)
	if c.leaderLock.Name != "" {
		le, err := mgrelection.ForRedisLock(ctx, cfg, c.leaderLock, "")
		if err != nil {
			return fmt.Errorf("controller: leader election: %w", err)
		}
		defer le.Close()
		le.Apply(&opts)
	}
	var certs *webhookcert.Manager
	if c.webhook.agentImage != "" {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: c.webhook.port, CertDir: c.webhook.certDir})
		if certs, err = c.webhook.certManager(ctx, cfg, scheme, c.log); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("controller: manager: %w", err)
	}
	if err := c.setup(ctx, mgr, certs); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// managerOptions are the manager's options for c, before leader election
// on a RedisLock and the webhook server.
func (c config) managerOptions(scheme *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Cache:                  c.cache,
		Scheme:                 scheme,
		Metrics:                metricsOptions(c.metricsAddr, c.metricsSecure),
		HealthProbeBindAddress: c.probeAddr,
		PprofBindAddress:       c.pprofAddr,
		LeaderElection:         c.leaderElect,
		LeaderElectionID:       c.leaderElectionID,
		// The Lease's namespace: the pod's (the chart and kustomize set
		// POD_NAMESPACE); empty, controller-runtime reads the in-cluster
		// service account's.
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		// The manager exits once its context ends, so a stopping leader
		// may give the Lease up at once (a rollout then hands over in
		// about a second, not a LeaseDuration).
		LeaderElectionReleaseOnCancel: true,
	}
}

// setup registers with mgr the RedisLock controller, the connections'
// protection, the webhook (with an agent image) and the health checks.
func (c config) setup(ctx context.Context, mgr manager.Manager, certs *webhookcert.Manager) error {
	clusterID, err := redisconn.ClusterID(ctx, mgr.GetAPIReader())
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	r := &controller.RedisLockReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: c.resync, ClusterID: clusterID, MaxConcurrentReconciles: c.workers,
		ConnectPolicy: c.connectPolicy}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: setup: %w", err)
	}
	protection := &controller.ConnectionProtection{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"),
		Finalizer: controller.ConnectionFinalizer(c.lockClass, slices.Collect(maps.Keys(c.cache.DefaultNamespaces)))}
	if err := protection.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: setup: %w", err)
	}
	if c.webhook.agentImage != "" {
		agent := inject.Agent{Image: c.webhook.agentImage, ClusterID: clusterID, Resources: c.agentResources}
		if err := setupWebhook(mgr, certs, agent, c.lockClass); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// certManager returns the manager of the webhook's certificate with
// -webhook-certs=self, after a first pass that writes the files the
// webhook server needs to start; nil with -webhook-certs=provided.
func (w *webhookFlags) certManager(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger) (*webhookcert.Manager, error) {
	if w.certs == certsProvided {
		return nil, nil
	}
	ns := os.Getenv("POD_NAMESPACE")
	hosts := []string{"redislock-webhook-service." + ns + ".svc"}
	if w.hosts != "" {
		hosts = strings.Split(strings.ReplaceAll(w.hosts, " ", ""), ",")
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	m, err := webhookcert.New(c, webhookcert.Options{
		Namespace: ns, SecretName: w.secret, WebhookConfigName: w.configuration,
		Hosts: hosts, CertDir: w.certDir, Logger: log.WithName("webhookcert"),
		// Often enough that a caBundle wiped by a re-apply of the webhook
		// configuration (kubectl replace, a GitOps sync) is back within a
		// minute; each pass is two GETs when nothing changed.
		CheckInterval: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	// The webhook server reads the files when it starts; a missing
	// configuration is logged and retried by the Manager's passes.
	if err := m.Ensure(ctx); err != nil && !errors.Is(err, webhookcert.ErrWebhookConfigNotFound) {
		return nil, fmt.Errorf("controller: webhook certificate: %w", err)
	} else if err != nil {
		log.Error(err, "webhook configuration not there yet; the caBundle is set once it is")
	}
	return m, nil
}

// setupWebhook registers the injector of agent for the locks of class, and
// certs (if any) to keep the certificate current on every replica.
func setupWebhook(mgr manager.Manager, certs *webhookcert.Manager, agent inject.Agent, class string) error {
	wh, err := inject.NewWebhook(mgr.GetAPIReader(), mgr.GetScheme(), agent, class)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	mgr.GetWebhookServer().Register(inject.Path, &webhook.Admission{Handler: wh})
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
}
