package controllercmd

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/kubeconfig"
)

// config is the controller's command line, parsed and checked.
type config struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionID string
	// leaderLock is -leader-election-redislock; empty without it.
	leaderLock types.NamespacedName
	kubeconfig string
	resync     time.Duration
	lockClass  string
	workers    int
	webhook    webhookFlags
	// connectPolicy is -allow-inline-redis and
	// -redis-allowed-destinations.
	connectPolicy controller.ConnectPolicy
	// agentResources and cache are derived from the flags.
	agentResources corev1.ResourceRequirements
	cache          cache.Options
	log            logr.Logger
}

// parseFlags parses and checks the controller's command line. Every flag
// is checked before anything connects: a usage error names the flag.
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS (a self-signed certificate) to clients whose bearer token the API server authenticates and authorizes for GET /metrics (TokenReview and SubjectAccessReview)")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof profiles (heap, CPU, goroutines), unauthenticated: bind it to localhost or keep it off the pod's network; empty turns it off")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "elect one active controller among replicas (a Lease in the controller's namespace)")
	fs.StringVar(&c.leaderElectionID, "leader-election-id", "redislock-controller", "the Lease's name, with -leader-elect")
	leaderRedisLock := fs.String("leader-election-redislock", "", "NAMESPACE/NAME: elect one active controller among replicas with this RedisLock instead of a Lease")
	kubeconfigPath := kubeconfig.Flag(fs)
	fs.DurationVar(&c.resync, "resync", 0, "longest time between two inspections of a lock (default 30s)")
	watchNamespaces := fs.String("watch-namespaces", "", "comma-separated namespaces whose RedisLocks and RedisConnections the controller reconciles (its RBAC can then be Roles there); default: all")
	fs.StringVar(&c.lockClass, "lock-class", "", "reconcile only the RedisLocks labelled "+v1alpha1.ClassLabel+"=<this>; default: only those without the label, so that several controllers can share a cluster")
	fs.IntVar(&c.workers, "max-concurrent-reconciles", 4, "how many RedisLocks are reconciled at once: a lock whose Redis is slow to answer holds up one of them for up to its nodeTimeout")
	allowInline := fs.Bool("allow-inline-redis", true, "serve RedisLocks whose spec.redis names Redis servers; false: only those that name a RedisConnection or ClusterRedisConnection (spec.connectionRef), the others are not Ready (InlineRedisForbidden) and the controller connects nowhere for them")
	destinations := fs.String("redis-allowed-destinations", "", "comma-separated CIDRs, IPs and DNS suffixes the controller may connect to for RedisLocks, checked on the IP of each connection (masters and nodes a Sentinel or Cluster names too): a name under a suffix is still refused on a loopback, link-local or unspecified IP no CIDR lists; default: anywhere")
	c.webhook.bind(fs)
	logFlags := cli.BindLogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, cli.Usagef("controller: unexpected arguments %q", fs.Args())
	}
	c.kubeconfig = *kubeconfigPath
	c.connectPolicy.ForbidInlineRedis = !*allowInline
	if err := c.check(*leaderRedisLock, *watchNamespaces, *destinations); err != nil {
		return c, err
	}
	c.log = logFlags.Logger()
	return c, nil
}

// check checks c and derives from it, and from the flags given, what the
// controller runs with; its errors are usage errors.
func (c *config) check(leaderRedisLock, watchNamespaces, destinations string) error {
	if c.workers < 1 {
		return cli.Usagef("controller: -max-concurrent-reconciles=%d: want 1 or more", c.workers)
	}
	var err error
	if c.connectPolicy.Destinations, err = controller.ParseDestinations(destinations); err != nil {
		return cli.Usagef("controller: -redis-allowed-destinations: %v", err)
	}
	if c.agentResources, err = c.webhook.agentResources(); err != nil {
		return cli.Usage(err)
	}
	if err := c.webhook.check(); err != nil {
		return cli.Usage(err)
	}
	if c.cache, err = cacheOptions(watchNamespaces, c.lockClass); err != nil {
		return cli.Usage(fmt.Errorf("controller: %w", err))
	}
	if leaderRedisLock == "" {
		return nil
	}
	if c.leaderElect {
		return cli.Usagef("controller: -leader-elect (a Lease) and -leader-election-redislock exclude each other")
	}
	ns, name, ok := strings.Cut(leaderRedisLock, "/")
	if !ok || validation.IsDNS1123Label(ns) != nil || validation.IsDNS1123Subdomain(name) != nil {
		return cli.Usagef("controller: -leader-election-redislock=%q: want NAMESPACE/NAME", leaderRedisLock)
	}
	c.leaderLock = types.NamespacedName{Namespace: ns, Name: name}
	return nil
}

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
	o.ByObject = map[client.Object]cache.ByObject{&v1alpha1.RedisLock{}: {Label: sel, Transform: controller.StripManagedFields}}
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
