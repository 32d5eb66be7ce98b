// Package controllercmd runs the RedisLock controller: the `redislock
// controller` subcommand.
package controllercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/cli"
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

// Webhook certificate sources (-webhook-certs).
const (
	certsSelf     = "self"
	certsProvided = "provided"
)

// webhookFlags configure the agent-injecting webhook.
type webhookFlags struct {
	agentImage, certs, certDir, secret, configuration, hosts string
	port                                                     int
	// agentQuantities are the agent's requests and limits, by flag name.
	agentQuantities []agentQuantity
}

// agentQuantity is one of the agent's requests or limits, as its flag sets it.
type agentQuantity struct {
	flag  string
	limit bool
	name  corev1.ResourceName
	value string
}

func (w *webhookFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&w.agentImage, "agent-image", os.Getenv("AGENT_IMAGE"), "image of the injected agent, normally this controller's own (default $AGENT_IMAGE); empty turns the webhook off")
	fs.IntVar(&w.port, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&w.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory of the webhook's tls.crt and tls.key")
	fs.StringVar(&w.certs, "webhook-certs", certsSelf, "who provides the webhook's certificate: "+certsSelf+" (the controller issues and rotates it, in -webhook-secret, and sets the caBundle of -webhook-configuration) or "+certsProvided+" (files in -webhook-cert-dir, say from cert-manager)")
	fs.StringVar(&w.secret, "webhook-secret", "redislock-webhook-cert", "with -webhook-certs=self: the Secret, in $POD_NAMESPACE, that holds the CA and the certificate")
	fs.StringVar(&w.configuration, "webhook-configuration", "redislock-mutating-webhook-configuration", "with -webhook-certs=self: the MutatingWebhookConfiguration whose caBundle the controller sets")
	fs.StringVar(&w.hosts, "webhook-hosts", "", "with -webhook-certs=self: comma-separated names (or IPs) of the certificate; default redislock-webhook-service.$POD_NAMESPACE.svc")
	defaults := inject.DefaultResources()
	w.agentQuantities = []agentQuantity{
		{flag: "agent-cpu-request", name: corev1.ResourceCPU},
		{flag: "agent-memory-request", name: corev1.ResourceMemory},
		{flag: "agent-cpu-limit", limit: true, name: corev1.ResourceCPU},
		{flag: "agent-memory-limit", limit: true, name: corev1.ResourceMemory},
	}
	for i := range w.agentQuantities {
		q := &w.agentQuantities[i]
		kind, list := "request", defaults.Requests
		if q.limit {
			kind, list = "limit", defaults.Limits
		}
		var dflt string
		if v, ok := list[q.name]; ok {
			dflt = v.String()
		}
		fs.StringVar(&q.value, q.flag, dflt, fmt.Sprintf("the injected agent's %s %s (a quantity; empty: none)", q.name, kind))
	}
}

// agentResources returns the agent's requests and limits from the flags, or
// an error naming the flag at fault: a value that is not a quantity, or a
// request above its limit (which the API server would refuse on every pod
// the webhook injects).
func (w *webhookFlags) agentResources() (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	parsed := make([]resource.Quantity, len(w.agentQuantities))
	for i, q := range w.agentQuantities {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			return corev1.ResourceRequirements{}, fmt.Errorf("controller: -%s=%q is not a quantity such as 100m or 64Mi", q.flag, q.value)
		}
		parsed[i] = v
		list := &r.Requests
		if q.limit {
			list = &r.Limits
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[q.name] = v
	}
	for i, req := range w.agentQuantities {
		for j, lim := range w.agentQuantities {
			if !req.limit && lim.limit && req.name == lim.name && req.value != "" && lim.value != "" && parsed[i].Cmp(parsed[j]) > 0 {
				return corev1.ResourceRequirements{}, fmt.Errorf("controller: -%s=%s is above -%s=%s; a request cannot exceed its limit", req.flag, req.value, lim.flag, lim.value)
			}
		}
	}
	return r, nil
}

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
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	metricsAddr := fs.String("metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off")
	metricsSecure := fs.Bool("metrics-secure", false, "serve /metrics over HTTPS (a self-signed certificate) to clients whose bearer token the API server authenticates and authorizes for GET /metrics (TokenReview and SubjectAccessReview)")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	leaderElect := fs.Bool("leader-elect", false, "elect one active controller among replicas (a Lease in the controller's namespace)")
	leaderElectionID := fs.String("leader-election-id", "redislock-controller", "the Lease's name, with -leader-elect")
	leaderRedisLock := fs.String("leader-election-redislock", "", "NAMESPACE/NAME: elect one active controller among replicas with this RedisLock instead of a Lease")
	kubeconfigPath := kubeconfig.Flag(fs)
	resync := fs.Duration("resync", 0, "longest time between two inspections of a lock (default 30s)")
	watchNamespaces := fs.String("watch-namespaces", "", "comma-separated namespaces whose RedisLocks and RedisConnections the controller reconciles (its RBAC can then be Roles there); default: all")
	lockClass := fs.String("lock-class", "", "reconcile only the RedisLocks labelled "+v1alpha1.ClassLabel+"=<this>; default: only those without the label, so that several controllers can share a cluster")
	workers := fs.Int("max-concurrent-reconciles", 4, "how many RedisLocks are reconciled at once: a lock whose Redis is slow to answer holds up one of them for up to its nodeTimeout")
	var wf webhookFlags
	wf.bind(fs)
	logFlags := cli.BindLogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	// Every flag is checked before anything connects: a usage error
	// names the flag.
	if fs.NArg() > 0 {
		return cli.Usagef("controller: unexpected arguments %q", fs.Args())
	}
	if *workers < 1 {
		return cli.Usagef("controller: -max-concurrent-reconciles=%d: want 1 or more", *workers)
	}
	agentResources, err := wf.agentResources()
	if err != nil {
		return cli.Usage(err)
	}
	if err := wf.check(); err != nil {
		return cli.Usage(err)
	}
	cacheOpts, err := cacheOptions(*watchNamespaces, *lockClass)
	if err != nil {
		return cli.Usage(fmt.Errorf("controller: %w", err))
	}
	var leaderLock types.NamespacedName
	if *leaderRedisLock != "" {
		if *leaderElect {
			return cli.Usagef("controller: -leader-elect (a Lease) and -leader-election-redislock exclude each other")
		}
		ns, name, ok := strings.Cut(*leaderRedisLock, "/")
		if !ok || validation.IsDNS1123Label(ns) != nil || validation.IsDNS1123Subdomain(name) != nil {
			return cli.Usagef("controller: -leader-election-redislock=%q: want NAMESPACE/NAME", *leaderRedisLock)
		}
		leaderLock = types.NamespacedName{Namespace: ns, Name: name}
	}
	log := logFlags.Logger()
	redisconn.RouteRedisLogs(log)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := kubeconfig.Load(*kubeconfigPath)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	opts := ctrl.Options{
		Cache:                  cacheOpts,
		Scheme:                 scheme,
		Metrics:                metricsOptions(*metricsAddr, *metricsSecure),
		HealthProbeBindAddress: *probeAddr,
		LeaderElection:         *leaderElect,
		LeaderElectionID:       *leaderElectionID,
		// The Lease's namespace: the pod's (the chart and kustomize set
		// POD_NAMESPACE); empty, controller-runtime reads the in-cluster
		// service account's.
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		// The manager exits once its context ends, so a stopping leader
		// may give the Lease up at once (a rollout then hands over in
		// about a second, not a LeaseDuration).
		LeaderElectionReleaseOnCancel: true,
	}
	if leaderLock.Name != "" {
		le, err := mgrelection.ForRedisLock(ctx, cfg, leaderLock, "")
		if err != nil {
			return fmt.Errorf("controller: leader election: %w", err)
		}
		defer le.Close()
		le.Apply(&opts)
	}
	var certs *webhookcert.Manager
	if wf.agentImage != "" {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: wf.port, CertDir: wf.certDir})
		if certs, err = wf.certManager(ctx, cfg, scheme, log); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("controller: manager: %w", err)
	}
	clusterID, err := redisconn.ClusterID(ctx, mgr.GetAPIReader())
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	r := &controller.RedisLockReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: *resync, ClusterID: clusterID, MaxConcurrentReconciles: *workers}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: setup: %w", err)
	}
	protection := &controller.ConnectionProtection{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"),
		Finalizer: controller.ConnectionFinalizer(*lockClass, slices.Collect(maps.Keys(cacheOpts.DefaultNamespaces)))}
	if err := protection.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: setup: %w", err)
	}
	if wf.agentImage != "" {
		agent := inject.Agent{Image: wf.agentImage, ClusterID: clusterID, Resources: agentResources}
		if err := setupWebhook(mgr, certs, agent, *lockClass); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// cacheOptions limits the manager's cache to the watched namespaces and to
// the RedisLocks of lockClass.
func cacheOptions(watchNamespaces, lockClass string) (cache.Options, error) {
	var o cache.Options
	for _, ns := range strings.Split(watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return o, fmt.Errorf("-watch-namespaces: %q: %s", ns, strings.Join(errs, "; "))
		}
		if o.DefaultNamespaces == nil {
			o.DefaultNamespaces = map[string]cache.Config{}
		}
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	sel, err := controller.ClassSelector(lockClass)
	if err != nil {
		return o, fmt.Errorf("-lock-class: %w", err)
	}
	o.ByObject = map[client.Object]cache.ByObject{&v1alpha1.RedisLock{}: {Label: sel}}
	return o, nil
}

// check says what is wrong with the webhook's flags, if anything: a value
// that is never valid, or (with -agent-image, which turns the webhook on)
// one that cannot work here.
func (w *webhookFlags) check() error {
	if w.certs != certsSelf && w.certs != certsProvided {
		return fmt.Errorf("controller: -webhook-certs=%q: want %s or %s", w.certs, certsSelf, certsProvided)
	}
	if w.agentImage != "" && w.certs == certsSelf && os.Getenv("POD_NAMESPACE") == "" {
		return fmt.Errorf("controller: -webhook-certs=self needs POD_NAMESPACE, the namespace of its Secret")
	}
	return nil
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
