package redisconn

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
)

// resolve is resolveConnection of c in ns, with field "spec.redis".
func resolve(r *v1alpha1.RedisConnectionSpec, secrets ...*corev1.Secret) (Config, error) {
	return resolveConnection(context.Background(), reader(secrets...), ns, "spec.redis", r)
}

// testPair is a certificate and its key, made once for the tests below.
var testPair = func() struct{ cert, key, otherKey []byte } {
	a, err := redisproc.NewCertificates()
	if err != nil {
		panic(err)
	}
	b, err := redisproc.NewCertificates()
	if err != nil {
		panic(err)
	}
	return struct{ cert, key, otherKey []byte }{a.ClientCert, a.ClientKey, b.ClientKey}
}()

// Resolve reads the Sentinels' credentials, the client certificate and
// insecureSkipVerify into the Config the clients are built from.
func TestResolveReadsSentinelCredentialsAndClientCertificate(t *testing.T) {
	c := &v1alpha1.RedisConnectionSpec{
		Mode: v1alpha1.ModeSentinel, Addrs: []string{"s:26379"}, MasterName: "m",
		SentinelUsernameSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: "user"},
		SentinelPasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: "pass"},
		TLS:                       &v1alpha1.RedisTLS{CertSecretRef: &v1alpha1.SecretRef{Name: "client"}, InsecureSkipVerify: ptr.To(true)},
	}
	cfg, err := resolve(c,
		secret("sentinel", map[string][]byte{"user": []byte("watcher"), "pass": []byte("s3cret")}),
		secret("client", map[string][]byte{corev1.TLSCertKey: testPair.cert, corev1.TLSPrivateKeyKey: testPair.key}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SentinelUsername != "watcher" || cfg.SentinelPassword != "s3cret" {
		t.Errorf("Sentinel credentials %q/%q, want watcher/s3cret", cfg.SentinelUsername, cfg.SentinelPassword)
	}
	if !slices.Equal(cfg.CertPEM, testPair.cert) || !slices.Equal(cfg.KeyPEM, testPair.key) {
		t.Error("the client certificate and key are not the Secret's tls.crt and tls.key")
	}
	if !cfg.TLS || !cfg.InsecureSkipVerify {
		t.Errorf("TLS %t, InsecureSkipVerify %t; want both", cfg.TLS, cfg.InsecureSkipVerify)
	}
	// The master's own credentials are apart from the Sentinels'.
	if cfg.Username != "" || cfg.Password != "" {
		t.Errorf("master credentials %q/%q, want none", cfg.Username, cfg.Password)
	}
}

// A missing Secret or key, or a certificate that does not parse, is an
// error that wraps ErrSecret or ErrInvalidSpec and names the field at fault.
func TestResolveNamesTheFieldOfABadSecret(t *testing.T) {
	certSpec := &v1alpha1.RedisConnectionSpec{Addrs: []string{"r:6379"}, TLS: &v1alpha1.RedisTLS{CertSecretRef: &v1alpha1.SecretRef{Name: "client"}}}
	sentinelSpec := &v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeSentinel, Addrs: []string{"s:26379"}, MasterName: "m",
		SentinelUsernameSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: "user"},
		SentinelPasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: "pass"}}
	pair := func(crt, key []byte) *corev1.Secret {
		return secret("client", map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key})
	}
	tests := []struct {
		name    string
		spec    *v1alpha1.RedisConnectionSpec
		secrets []*corev1.Secret
		is      error
		want    []string
	}{
		{"no certificate Secret", certSpec, nil, ErrSecret,
			[]string{"spec.redis.tls.certSecretRef: Secret locks/client not found"}},
		{"no tls.key", certSpec, []*corev1.Secret{secret("client", map[string][]byte{corev1.TLSCertKey: testPair.cert})}, ErrSecret,
			[]string{`spec.redis.tls.certSecretRef: Secret locks/client has no key "tls.key"`}},
		{"no tls.crt", certSpec, []*corev1.Secret{secret("client", map[string][]byte{corev1.TLSPrivateKeyKey: testPair.key})}, ErrSecret,
			[]string{`spec.redis.tls.certSecretRef: Secret locks/client has no key "tls.crt"`}},
		{"tls.crt not PEM", certSpec, []*corev1.Secret{pair([]byte("not PEM"), testPair.key)}, ErrInvalidSpec,
			[]string{"spec.redis.tls.certSecretRef: Secret locks/client keys tls.crt and tls.key are not a PEM certificate and its private key", "certificate input"}},
		{"tls.key not PEM", certSpec, []*corev1.Secret{pair(testPair.cert, []byte("not PEM"))}, ErrInvalidSpec,
			[]string{"spec.redis.tls.certSecretRef", "key input"}},
		{"the key of another certificate", certSpec, []*corev1.Secret{pair(testPair.cert, testPair.otherKey)}, ErrInvalidSpec,
			[]string{"spec.redis.tls.certSecretRef", "private key does not match public key"}},
		{"no Sentinel Secret", sentinelSpec, nil, ErrSecret,
			[]string{"spec.redis.sentinelUsernameSecretRef: Secret locks/sentinel not found"}},
		{"no Sentinel password key", sentinelSpec, []*corev1.Secret{secret("sentinel", map[string][]byte{"user": []byte("u")})}, ErrSecret,
			[]string{`spec.redis.sentinelPasswordSecretRef: Secret locks/sentinel has no key "pass"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(tt.spec, tt.secrets...)
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want one wrapping %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Every field of a Config that says how Redis is reached is part of its
// Key, so that two locks share clients only when every such setting is the
// same: a field left out would hand a lock clients with another's
// credentials or certificates. The two others (what a lock does with
// evicting nodes, which shared connection it came from) must not split
// clients of the same servers.
func TestKeyChangesWithEveryField(t *testing.T) {
	base := Config{Mode: v1alpha1.ModeStandalone, Addrs: []string{"a:1"}, NodeTimeout: time.Second}
	rt := reflect.TypeFor[Config]()
	notReaching := map[string]bool{"EvictingNodes": true, "Connection": true, "CheckDestination": true}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if notReaching[f.Name] {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			changed := base
			changed.Addrs = slices.Clone(base.Addrs)
			v := reflect.ValueOf(&changed).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString(v.String() + "x")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Int, reflect.Int64:
				v.SetInt(v.Int() + 1)
			case reflect.Slice:
				switch f.Type.Elem().Kind() {
				case reflect.Uint8:
					v.SetBytes(append(v.Bytes(), 'x'))
				case reflect.String:
					v.Set(reflect.Append(v, reflect.ValueOf("b:2")))
				}
			default:
				t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
			}
			if changed.Key() == base.Key() {
				t.Fatalf("changing %s leaves the Key as it was", f.Name)
			}
		})
	}
	// A value moved from one field to the next is another Config.
	a, b := base, base
	a.Username, a.Password = "ab", ""
	b.Username, b.Password = "a", "b"
	if a.Key() == b.Key() {
		t.Fatal("username \"ab\" and username \"a\" with password \"b\" have one Key")
	}
}

// On a ClusterRedisConnection with tenantSecretName, a candidate of a
// lock in namespace shop authenticates with shop's Secret, and needs no
// read of the connection's password Secret; the controller (Resolve) keeps
// the connection's own credentials. A tenant Secret that is missing, or
// lacks a key, names the field.
func TestTenantConnectionGivesCandidatesTheirNamespacesUser(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	conn := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.ClusterRedisConnectionSpec{
		RedisConnectionSpec: v1alpha1.RedisConnectionSpec{
			Addrs:             []string{"redis:6379"},
			UsernameSecretRef: &v1alpha1.SecretKeyRef{Name: "admin", Key: "user"},
			PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "admin", Key: "pass"},
		},
		SecretNamespace: "redislock-system", TenantSecretName: "redis-tenant",
	}}
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "redislock-system", Name: "admin"}, Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("root")}}
	shop := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "redis-tenant"}, Data: map[string][]byte{"username": []byte("redislock-shop"), "password": []byte("pw-shop")}}
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "broken", Name: "redis-tenant"}, Data: map[string][]byte{"username": []byte("redislock-broken")}}
	lock := func(namespace string) *v1alpha1.RedisLock {
		return &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "worker"}, Spec: v1alpha1.RedisLockSpec{
			ConnectionRef: &v1alpha1.ConnectionRef{Kind: v1alpha1.KindClusterRedisConnection, Name: "shared"},
		}}
	}
	ctx := context.Background()
	// The candidate's reader has no admin Secret: it must not need one.
	candidate := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn, shop, broken).Build()
	cfg, err := resolveFor(ctx, candidate, lock("shop"), true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "redislock-shop" || cfg.Password != "pw-shop" || cfg.Connection != "ClusterRedisConnection/shared" {
		t.Errorf("a candidate in shop: user %q, password %q, connection %q; want redislock-shop, pw-shop, ClusterRedisConnection/shared", cfg.Username, cfg.Password, cfg.Connection)
	}
	controller := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn, admin, shop).Build()
	if cfg, err = Resolve(ctx, controller, lock("shop")); err != nil || cfg.Username != "admin" || cfg.Password != "root" {
		t.Errorf("the controller: user %q, password %q, %v; want the connection's admin/root", cfg.Username, cfg.Password, err)
	}
	for namespace, want := range map[string]string{
		"other":  "ClusterRedisConnection shared: spec.tenantSecretName: Secret other/redis-tenant not found",
		"broken": `ClusterRedisConnection shared: spec.tenantSecretName: Secret broken/redis-tenant has no key "password"`,
	} {
		_, err := resolveFor(ctx, candidate, lock(namespace), true)
		if !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), want) {
			t.Errorf("a candidate in %s: %v; want ErrSecret, %q", namespace, err, want)
		}
	}
}

// A Secret the candidate may not read (the agent's role grants Secrets by
// name only) is ErrSecret, naming the field and the grant that fixes it.
func TestResolveSaysHowToGrantAForbiddenSecret(t *testing.T) {
	forbidden := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("RBAC: access denied"))
		},
	}).Build()
	c := &v1alpha1.RedisConnectionSpec{Addrs: []string{"redis:6379"}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}}
	_, err := resolveConnection(context.Background(), forbidden, ns, "spec.redis", c)
	want := "spec.redis.passwordSecretRef: may not read Secret " + ns + "/redis-auth; grant get on it by name: kubectl create role redis-auth-reader -n " + ns + " --verb=get --resource=secrets --resource-name=redis-auth"
	if !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v; want ErrSecret, %q", err, want)
	}
}
