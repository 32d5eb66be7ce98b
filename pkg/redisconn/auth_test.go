package redisconn

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// The connection's credentials and TLS settings, on real servers: a
// password-protected Sentinel, a TLS server that requires client
// certificates, and one whose certificate no given CA signs.

const ns = "locks"

// secret is a Secret in ns with data.
func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// reader serves secrets, as the API server would.
func reader(secrets ...*corev1.Secret) client.Reader {
	objs := make([]client.Object, len(secrets))
	for i, s := range secrets {
		objs[i] = s
	}
	return fake.NewClientBuilder().WithObjects(objs...).Build()
}

// lockWith resolves spec c with the Secrets of r, as a RedisLock in ns,
// and obtains and releases a lock through its clients; it returns the
// first error, of Resolve or of the lock.
func lockWith(t *testing.T, r client.Reader, c v1alpha1.RedisConnectionSpec) error {
	t.Helper()
	// Long enough for the reason of a refusal to arrive: a server that
	// refuses the client's certificate does so after the TLS 1.3
	// handshake, at the first command, which go-redis retries on new
	// connections (MaxRetries) for about 500ms, so that under the default
	// 200ms the error is a timeout.
	c.NodeTimeout = &v1alpha1.Duration{Duration: 2 * time.Second}
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l"}, Spec: v1alpha1.RedisLockSpec{Redis: &c}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := Resolve(ctx, r, rl)
	if err != nil {
		return err
	}
	nodes := cfg.Clients()
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	lc, err := redislock.New(nodes, &redislock.Options{AssumeDurable: true, Identity: t.Name(), NodeTimeout: cfg.NodeTimeout, WaitReplicas: cfg.WaitReplicas})
	if err != nil {
		return err
	}
	l, err := lc.Obtain(ctx, "auth", 10*time.Second)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// wantErr fails t unless err contains every string of want.
func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q lacks %q", err, w)
		}
	}
	t.Logf("failed as expected: %v", err)
}

// A Sentinel that requires a password (requirepass, as Bitnami's chart
// sets by default) answers with the password of sentinelPasswordSecretRef,
// and the error without it or with a wrong one says authentication failed.
func TestSentinelPasswordAuthenticatesToTheSentinels(t *testing.T) {
	master := redistest.Start(t, redisproc.Options{})
	sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr, Password: "s3ntinel"})
	r := reader(secret("sentinel", map[string][]byte{"password": []byte("s3ntinel"), "wrong": []byte("nope")}))
	spec := func(key string) v1alpha1.RedisConnectionSpec {
		c := v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeSentinel, Addrs: []string{sentinel.Addr}, MasterName: "mymaster", WaitReplicas: ptr.To[int32](0)}
		if key != "" {
			c.SentinelPasswordSecretRef = &v1alpha1.SecretKeyRef{Name: "sentinel", Key: key}
		}
		return c
	}
	if err := lockWith(t, r, spec("password")); err != nil {
		t.Fatalf("with the Sentinel's password: %v", err)
	}
	wantErr(t, lockWith(t, r, spec("")), "NOAUTH Authentication required")
	wantErr(t, lockWith(t, r, spec("wrong")), "WRONGPASS")
}

// A Sentinel with an ACL user besides its default one answers to that
// user with the user's password, sent with sentinelUsernameSecretRef: the
// default user's password does not make that user.
func TestSentinelUsernameAuthenticatesAsAnACLUser(t *testing.T) {
	master := redistest.Start(t, redisproc.Options{})
	sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr, Password: "s3ntinel",
		Args: []string{"--user", "watcher", "on", ">w4tch", "+@all", "allchannels"}})
	r := reader(secret("sentinel", map[string][]byte{"user": []byte("watcher"), "password": []byte("w4tch"), "default-password": []byte("s3ntinel")}))
	spec := func(passwordKey string) v1alpha1.RedisConnectionSpec {
		return v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeSentinel, Addrs: []string{sentinel.Addr}, MasterName: "mymaster", WaitReplicas: ptr.To[int32](0),
			SentinelUsernameSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: "user"},
			SentinelPasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "sentinel", Key: passwordKey}}
	}
	if err := lockWith(t, r, spec("password")); err != nil {
		t.Fatalf("as watcher: %v", err)
	}
	wantErr(t, lockWith(t, r, spec("default-password")), "WRONGPASS")
}
