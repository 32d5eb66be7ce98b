// Package redisconn turns a RedisLock's spec, its connection and their
// Secrets into the Redis clients, lock name and timing that the lock
// engine (pkg/redislock) takes. The controller, the leader-election plugin
// (pkg/mgrelection) and the agent share it, so all three read a RedisLock
// the same way; a program of your own that campaigns on a RedisLock can
// use it too: OpenCandidate does all of it.
package redisconn

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redislock"
)

// Sentinel errors of Resolve.
var (
	// ErrSecret means a Secret the spec names is missing, or lacks the key.
	ErrSecret = errors.New("redisconn: secret")
	// ErrInvalidSpec means the spec breaks a rule the API server cannot check.
	ErrInvalidSpec = errors.New("redisconn: invalid spec")
	// ErrConnection means the connection spec.connectionRef names is
	// missing.
	ErrConnection = errors.New("redisconn: connection")
)

// Config is everything needed to reach a RedisLock's Redis deployment.
// Two RedisLocks with equal Configs share clients.
type Config struct {
	Mode       v1alpha1.RedisMode
	Addrs      []string
	MasterName string
	DB         int
	Username   string
	Password   string
	// SentinelUsername and SentinelPassword authenticate to the
	// Sentinels, in Sentinel mode.
	SentinelUsername string
	SentinelPassword string
	TLS              bool
	CAPEM            []byte
	ServerName       string
	// CertPEM and KeyPEM are the client certificate (with its chain) and
	// its private key, presented to servers that ask for one; both nil
	// for none.
	CertPEM []byte
	KeyPEM  []byte
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool
	NodeTimeout        time.Duration
	// WaitReplicas is redislock.Options.WaitReplicas: spec.redis.waitReplicas,
	// redislock.WaitAllReplicas by default in Sentinel and Cluster modes,
	// else 0.
	WaitReplicas int
	// EvictingNodes is the connection's evictingNodes policy. Not part
	// of Key: it does not change how Redis is reached.
	EvictingNodes v1alpha1.EvictingNodes
	// Connection is the shared connection used, as status.connection
	// shows it ("RedisConnection/<name>"); empty for spec.redis. Not part
	// of Key.
	Connection string
	// CheckDestination, when not nil, is asked before each connection of
	// the clients Clients returns is made, to any server (a node, a
	// Sentinel, a master or replica a Sentinel or Cluster names): addr as
	// dialed (host:port) and resolved, the IP:port the connection goes to.
	// An error fails the dial, wrapped, before a packet is sent. Not part
	// of Key: one process sets the same check on every Config.
	CheckDestination func(addr, resolved string) error
}

// Timing returns the lock's timing as candidates use it: the spec's, with
// an unset ttl taken as redislock.DefaultTTL (the API server defaults it to
// the same 15s) and an unset renewInterval or renewDeadline derived from
// ttl as redislock.Timing documents its defaults (2/15 and 2/3 of ttl). The
// API server's rules check the same derived values, so a spec it accepts
// passes CheckTiming; the client-go durations of the plugin and the
// agent's publishing period come from here too, never zero.
func Timing(rl *v1alpha1.RedisLock) redislock.Timing {
	d := func(v *v1alpha1.Duration) time.Duration {
		if v == nil {
			return 0
		}
		return v.Duration
	}
	return redislock.Timing{TTL: d(rl.Spec.TTL), RenewInterval: d(rl.Spec.RenewInterval), RenewDeadline: d(rl.Spec.RenewDeadline)}.WithDefaults()
}

// checkDurations reports the first duration field of rl that does not
// parse: stored before the CRD refused such text, it decodes (see
// v1alpha1.Duration) but cannot be used.
func checkDurations(rl *v1alpha1.RedisLock) error {
	for _, f := range []struct {
		name string
		d    *v1alpha1.Duration
	}{{"spec.ttl", rl.Spec.TTL}, {"spec.renewInterval", rl.Spec.RenewInterval}, {"spec.renewDeadline", rl.Spec.RenewDeadline}} {
		if err := checkDuration(f.name, f.d); err != nil {
			return err
		}
	}
	return nil
}

func checkDuration(field string, d *v1alpha1.Duration) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w (write it as Go does, such as 15s, 1m30s or 24h)", ErrInvalidSpec, field, err)
	}
	return nil
}

// Resolve reads the connection rl uses (spec.redis, or the one
// spec.connectionRef names) and its Secrets, through r, and returns its
// Config. Errors wrap ErrSecret, ErrInvalidSpec or ErrConnection and name the
// object and field at fault.
func Resolve(ctx context.Context, r client.Reader, rl *v1alpha1.RedisLock) (Config, error) {
	return resolveFor(ctx, r, rl, false)
}

// resolveFor is Resolve, for a candidate of rl when candidate is set: on a
// ClusterRedisConnection with a tenantSecretName, with the credentials of
// rl's namespace instead of the connection's.
func resolveFor(ctx context.Context, r client.Reader, rl *v1alpha1.RedisLock, candidate bool) (Config, error) {
	if err := checkDurations(rl); err != nil {
		return Config{}, err
	}
	ref := rl.Spec.ConnectionRef
	if ref == nil {
		if rl.Spec.Redis == nil {
			return Config{}, fmt.Errorf("%w: set spec.redis or spec.connectionRef", ErrInvalidSpec)
		}
		return resolveConnection(ctx, r, rl.Namespace, "spec.redis", rl.Spec.Redis)
	}
	var (
		spec  *v1alpha1.RedisConnectionSpec
		ns    string
		key   = types.NamespacedName{Name: ref.Name}
		obj   client.Object
		named string
	)
	kind := ref.Kind
	if kind == "" {
		kind = v1alpha1.KindRedisConnection
	}
	switch kind {
	case v1alpha1.KindClusterRedisConnection:
		c := &v1alpha1.ClusterRedisConnection{}
		obj, spec, named = c, &c.Spec.RedisConnectionSpec, string(kind)+" "+ref.Name
	case v1alpha1.KindRedisConnection:
		c := &v1alpha1.RedisConnection{}
		key.Namespace, named = rl.Namespace, string(kind)+" "+rl.Namespace+"/"+ref.Name
		obj, spec = c, &c.Spec
	default:
		return Config{}, fmt.Errorf("%w: spec.connectionRef.kind %q: want RedisConnection or ClusterRedisConnection", ErrInvalidSpec, kind)
	}
	// Named even when it cannot be read, so that the status says which.
	used := Config{Connection: string(kind) + "/" + ref.Name}
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return used, fmt.Errorf("%w: spec.connectionRef: %s not found", ErrConnection, named)
		}
		return used, fmt.Errorf("spec.connectionRef: read %s: %w", named, err)
	}
	if c, ok := obj.(*v1alpha1.ClusterRedisConnection); ok {
		if !c.Spec.Allows(rl.Namespace) {
			return used, fmt.Errorf("%w: spec.connectionRef: %s does not allow namespace %s (its spec.allowedNamespaces: %s)", ErrInvalidSpec, named, rl.Namespace, strings.Join(c.Spec.AllowedNamespaces, ", "))
		}
		ns = c.Spec.SecretNamespace
		if candidate && c.Spec.TenantSecretName != "" {
			cfg, err := tenantConfig(ctx, r, rl.Namespace, named, c)
			cfg.Connection = used.Connection
			return cfg, err
		}
	} else {
		ns = rl.Namespace
	}
	cfg, err := resolveConnection(ctx, r, ns, named+": spec", spec)
	cfg.Connection = used.Connection
	return cfg, err
}

// tenantConfig is the Config of a candidate in namespace of the
// ClusterRedisConnection c (named so in errors), which has a
// tenantSecretName: the username and password come from that Secret of
// namespace, the rest from c's own Secrets.
func tenantConfig(ctx context.Context, r client.Reader, namespace, named string, c *v1alpha1.ClusterRedisConnection) (Config, error) {
	spec := c.Spec.RedisConnectionSpec
	spec.UsernameSecretRef, spec.PasswordSecretRef = nil, nil
	cfg, err := resolveConnection(ctx, r, c.Spec.SecretNamespace, named+": spec", &spec)
	if err != nil {
		return cfg, err
	}
	v, err := secretValues(ctx, r, namespace, named+": spec.tenantSecretName", c.Spec.TenantSecretName, "username", "password")
	if err != nil {
		return cfg, err
	}
	cfg.Username, cfg.Password = string(v[0]), string(v[1])
	return cfg, nil
}

// resolveConnection returns the Config of connection c, whose Secrets are
// in namespace ns; field is c's path, for error messages.
func resolveConnection(ctx context.Context, r client.Reader, ns, field string, c *v1alpha1.RedisConnectionSpec) (Config, error) {
	if err := checkDuration(field+".nodeTimeout", c.NodeTimeout); err != nil {
		return Config{}, err
	}
	cfg := Config{Mode: c.Mode, Addrs: c.Addrs, MasterName: c.MasterName, NodeTimeout: redislock.DefaultNodeTimeout, EvictingNodes: c.EvictingNodes}
	if cfg.Mode == "" {
		cfg.Mode = v1alpha1.ModeStandalone
	}
	if c.DB != nil {
		cfg.DB = int(*c.DB)
	}
	if c.NodeTimeout != nil {
		cfg.NodeTimeout = c.NodeTimeout.Duration
	}
	switch {
	case c.WaitReplicas != nil:
		cfg.WaitReplicas = int(*c.WaitReplicas)
	case cfg.Mode == v1alpha1.ModeSentinel, cfg.Mode == v1alpha1.ModeCluster:
		cfg.WaitReplicas = redislock.WaitAllReplicas
	}
	var err error
	// get returns the values of keys in Secret name, which field names;
	// after a failed read, nils, err holding the first failure.
	get := func(field, name string, keys ...string) [][]byte {
		if err == nil {
			var v [][]byte
			if v, err = secretValues(ctx, r, ns, field, name, keys...); err == nil {
				return v
			}
		}
		return make([][]byte, len(keys))
	}
	getKey := func(name string, ref *v1alpha1.SecretKeyRef) []byte {
		if ref == nil {
			return nil
		}
		return get(field+"."+name, ref.Name, ref.Key)[0]
	}
	cfg.Username = string(getKey("usernameSecretRef", c.UsernameSecretRef))
	cfg.Password = string(getKey("passwordSecretRef", c.PasswordSecretRef))
	cfg.SentinelUsername = string(getKey("sentinelUsernameSecretRef", c.SentinelUsernameSecretRef))
	cfg.SentinelPassword = string(getKey("sentinelPasswordSecretRef", c.SentinelPasswordSecretRef))
	if c.TLS != nil {
		cfg.TLS = true
		cfg.ServerName = c.TLS.ServerName
		cfg.InsecureSkipVerify = c.TLS.InsecureSkipVerify != nil && *c.TLS.InsecureSkipVerify
		cfg.CAPEM = getKey("tls.caSecretRef", c.TLS.CASecretRef)
		if err == nil && cfg.CAPEM != nil && !x509.NewCertPool().AppendCertsFromPEM(cfg.CAPEM) {
			err = fmt.Errorf("%w: %s.tls.caSecretRef: no PEM certificate in Secret %s key %s", ErrInvalidSpec, field, c.TLS.CASecretRef.Name, c.TLS.CASecretRef.Key)
		}
		if ref := c.TLS.CertSecretRef; ref != nil {
			// One read of the Secret, so that a rotation never pairs
			// one certificate with another's key.
			pair := get(field+".tls.certSecretRef", ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			cfg.CertPEM, cfg.KeyPEM = pair[0], pair[1]
			if err == nil {
				if _, perr := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM); perr != nil {
					err = fmt.Errorf("%w: %s.tls.certSecretRef: Secret %s/%s keys %s and %s are not a PEM certificate and its private key: %w",
						ErrInvalidSpec, field, ns, ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, perr)
				}
			}
		}
	}
	return cfg, err
}

// secretValues reads Secret ns/name once and returns the values of keys,
// each required; field is the spec field that names the Secret.
func secretValues(ctx context.Context, r client.Reader, ns, field, name string, keys ...string) ([][]byte, error) {
	if ns == "" {
		return nil, fmt.Errorf("%w: %s names Secret %s, but the connection has no secretNamespace", ErrInvalidSpec, field, name)
	}
	var s corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s: Secret %s/%s not found", ErrSecret, field, ns, name)
		}
		if apierrors.IsForbidden(err) {
			// A candidate reads only the Secrets it was granted by name.
			return nil, fmt.Errorf("%w: %s: may not read Secret %s/%s; grant get on it by name: kubectl create role %s-reader -n %s --verb=get --resource=secrets --resource-name=%s, and a RoleBinding of it to the service account: %w",
				ErrSecret, field, ns, name, name, ns, name, err)
		}
		return nil, fmt.Errorf("%s: read Secret %s/%s: %w", field, ns, name, err)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, ok := s.Data[k]
		if !ok {
			return nil, fmt.Errorf("%w: %s: Secret %s/%s has no key %q", ErrSecret, field, ns, name, k)
		}
		out[i] = v
	}
	return out, nil
}

// Key identifies the Config; equal Configs have equal Keys. Secrets are
// hashed, never shown.
func (c Config) Key() string {
	h := sha256.New()
	// Each variable-length field is written with its length, so that no
	// two Configs write the same bytes.
	for _, f := range [][]byte{
		[]byte(c.Mode), []byte(strings.Join(c.Addrs, ",")), []byte(c.MasterName), []byte(c.Username), []byte(c.Password),
		[]byte(c.SentinelUsername), []byte(c.SentinelPassword), c.CAPEM, []byte(c.ServerName), c.CertPEM, c.KeyPEM,
	} {
		_, _ = fmt.Fprintf(h, "%d:%s\x00", len(f), f)
	}
	_, _ = fmt.Fprintf(h, "%d\x00%t\x00%t\x00%d\x00%d", c.DB, c.TLS, c.InsecureSkipVerify, c.NodeTimeout, c.WaitReplicas)
	return hex.EncodeToString(h.Sum(nil))
}

// Clients returns new clients for the Config: one per independent node
// (one, except in Redlock mode). Calls are bounded by their context
// (ContextTimeoutEnabled) and by NodeTimeout. No server, node or Sentinel,
// can make them allocate more for a reply than the limits of limitReplies
// allow: a reply over them fails its call with ErrReplyTooLarge (or
// ErrNotRedis, for one that is not RESP). The caller closes them.
func (c Config) Clients() []redis.UniversalClient {
	var tlsConf *tls.Config
	if c.TLS {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify}
		if c.CAPEM != nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(c.CAPEM)
			tlsConf.RootCAs = pool
		}
		if c.CertPEM != nil || c.KeyPEM != nil {
			// Resolve has checked the pair; one built otherwise that does
			// not parse fails each handshake with the parse error.
			cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
			tlsConf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if err != nil {
					return nil, fmt.Errorf("redisconn: client certificate: %w", err)
				}
				return &cert, nil
			}
		}
	}
	dial := dialer(c.NodeTimeout, tlsConf, c.CheckDestination)
	opts := func(addrs []string) *redis.UniversalOptions {
		return &redis.UniversalOptions{
			Addrs: addrs, MasterName: c.MasterName, DB: c.DB,
			Username: c.Username, Password: c.Password, TLSConfig: tlsConf,
			SentinelUsername: c.SentinelUsername, SentinelPassword: c.SentinelPassword,
			DialTimeout: c.NodeTimeout, ReadTimeout: c.NodeTimeout, WriteTimeout: c.NodeTimeout,
			ContextTimeoutEnabled: true,
			// One dial per call: the lock's callers retry at their own
			// pace, and the dial's own error (a refused connection, an
			// x509 failure) reaches the status instead of a timeout.
			DialerRetries: 1,
			IsClusterMode: c.Mode == v1alpha1.ModeCluster,
			// Every server these clients reach, the Sentinels included,
			// is dialed through it: with TLSConfig, replies limited.
			Dialer: dial,
			// No maintenance notifications (a Redis Enterprise feature,
			// which a Sentinel client never asks for). In go-redis
			// v9.23.0 a client's Conn shares its Options under a lock of
			// its own, so the first connections of each, set up at once,
			// race on the auto mode's downgrade; WaitReplicas writes on a
			// Conn (TestClientsAndTheirConnsConnectAtOnce).
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		}
	}
	if c.Mode == v1alpha1.ModeSentinel {
		// Its Sentinels say which replicas WaitAllReplicas waits for.
		return []redis.UniversalClient{redislock.NewSentinelNode(opts(c.Addrs).Failover())}
	}
	if c.Mode != v1alpha1.ModeRedlock {
		return []redis.UniversalClient{redis.NewUniversalClient(opts(c.Addrs))}
	}
	out := make([]redis.UniversalClient, len(c.Addrs))
	for i, a := range c.Addrs {
		out[i] = redis.NewUniversalClient(opts([]string{a}))
	}
	return out
}

// Candidate is what one candidate needs to campaign for a RedisLock: the
// object as read, a lock client on new connections, the lock's name in
// Redis and its timing, already checked against the client.
type Candidate struct {
	Object *v1alpha1.RedisLock
	Client *redislock.Client
	Name   string
	Timing redislock.Timing

	nodes []redis.UniversalClient
}

// OpenCandidate reads the RedisLock ref and its Secrets through r and
// opens a lock client for it with o (NodeTimeout comes from the spec). A
// lock of scope Cluster is named with clusterID; "" means ClusterID(ctx, r).
// The caller closes it. Errors name the RedisLock, and the field at fault
// where there is one.
func OpenCandidate(ctx context.Context, r client.Reader, ref types.NamespacedName, clusterID string, o redislock.Options) (*Candidate, error) {
	var rl v1alpha1.RedisLock
	if err := r.Get(ctx, ref, &rl); err != nil {
		return nil, fmt.Errorf("get RedisLock %s: %w", ref, err)
	}
	cfg, err := resolveFor(ctx, r, &rl, true)
	if err != nil {
		return nil, fmt.Errorf("RedisLock %s: %w", ref, err)
	}
	nodes := cfg.Clients()
	o.NodeTimeout, o.WaitReplicas = cfg.NodeTimeout, cfg.WaitReplicas
	if clusterID == "" && rl.Spec.Scope != v1alpha1.ScopeGlobal {
		if clusterID, err = ClusterID(ctx, r); err != nil {
			return nil, fmt.Errorf("RedisLock %s: %w", ref, err)
		}
	}
	c := &Candidate{Object: &rl, Name: LockName(&rl, clusterID), Timing: Timing(&rl), nodes: nodes}
	if c.Client, err = redislock.New(nodes, &o); err == nil {
		err = c.Client.CheckTiming(c.Timing)
	}
	if err == nil && cfg.EvictingNodes == v1alpha1.EvictingNodesRefuse {
		err = c.Client.CheckEviction(ctx)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("RedisLock %s: %w", ref, err)
	}
	return c, nil
}

// Close closes the candidate's Redis connections.
func (c *Candidate) Close() {
	for _, n := range c.nodes {
		_ = n.Close()
	}
}

// NewAPIClient returns an uncached API client that knows core/v1 and
// RedisLocks: what a candidate needs to read its RedisLock and Secrets
// (and, for the agent, to label its pod).
func NewAPIClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
