package mgrelection_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/internal/testenv"
	"github.com/redislock/redislock/pkg/mgrelection"
)

var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	testenv.Main("../..", &envtest.Environment{}, true, func(c *rest.Config) (int, error) {
		scheme, err := testenv.Scheme()
		if err != nil {
			return 0, err
		}
		if k8s, err = client.New(c, client.Options{Scheme: scheme}); err != nil {
			return 0, err
		}
		cfg = c
		return m.Run(), nil
	})
}

// lockOn returns a RedisLock in default on addr, with edit applied, created
// through the API server.
func lockOn(t *testing.T, name, addr string, edit func(*v1alpha1.RedisLock)) types.NamespacedName {
	t.Helper()
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.RedisLockSpec{
			Redis: v1alpha1.RedisConnection{Mode: v1alpha1.ModeStandalone, Addrs: []string{addr}},
			TTL:   &v1alpha1.Duration{Duration: 4 * time.Second},
		},
	}
	if edit != nil {
		edit(rl)
	}
	if err := k8s.Create(context.Background(), rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rl) })
	return client.ObjectKeyFromObject(rl)
}

// ForRedisLock's errors tell their causes apart through this package's
// sentinels and API errors, with nothing of internal/ to import. (A
// RedisLock the engine would refuse, the API server refuses first; Redis
// is not reached before these checks.)
func TestForRedisLockErrorsWrapExportedSentinels(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-pem"}, Data: map[string][]byte{"ca.crt": []byte("not a certificate")}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.RedisLock)
		is   func(error) bool
		want string
	}{
		{"missing password Secret", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.PasswordSecretRef = &v1alpha1.SecretKeyRef{Name: "nowhere", Key: "password"}
		}, func(err error) bool { return errors.Is(err, mgrelection.ErrSecret) }, "ErrSecret"},
		{"CA that is no certificate", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.TLS = &v1alpha1.RedisTLS{CASecretRef: &v1alpha1.SecretKeyRef{Name: "not-pem", Key: "ca.crt"}}
		}, func(err error) bool { return errors.Is(err, mgrelection.ErrInvalidSpec) }, "ErrInvalidSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := lockOn(t, "errs", "127.0.0.1:1", tc.edit)
			open, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			e, err := mgrelection.ForRedisLock(open, cfg, ref, "a")
			if err == nil {
				e.Close()
				t.Fatal("ForRedisLock succeeded")
			}
			if !tc.is(err) {
				t.Fatalf("ForRedisLock: %v; want it to wrap %s", err, tc.want)
			}
		})
	}
	_, err := mgrelection.ForRedisLock(ctx, cfg, types.NamespacedName{Namespace: "default", Name: "absent"}, "a")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("ForRedisLock of a missing RedisLock: %v; want a NotFound API error", err)
	}
}

// A working RedisLock gives a Lock on its lock name and the manager
// options of its timing.
func TestForRedisLockSetsManagerOptions(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ref := lockOn(t, "works", s.Addr, func(rl *v1alpha1.RedisLock) {
		rl.Spec.RenewInterval = &v1alpha1.Duration{Duration: 500 * time.Millisecond}
		rl.Spec.RenewDeadline = &v1alpha1.Duration{Duration: 3 * time.Second}
	})
	ctx := context.Background()
	c := s.Client()
	defer func() { _ = c.Close() }()
	// A fencing counter spares the wait of the restart guard on this
	// fresh server.
	if err := c.Set(ctx, "redislock:{default/works}:fence", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	e, err := mgrelection.ForRedisLock(ctx, cfg, ref, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var o manager.Options
	e.Apply(&o)
	if !o.LeaderElection || o.LeaderElectionResourceLockInterface == nil || !o.LeaderElectionReleaseOnCancel ||
		*o.LeaseDuration != 4*time.Second || *o.RenewDeadline != 3*time.Second || *o.RetryPeriod != 500*time.Millisecond {
		t.Fatalf("options %+v; want leader election on the lock, released on cancel, 4s/3s/500ms", o)
	}
	if err := e.Lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "redislock:{default/works}").Result(); err != nil || got[len(got)-2:] != ":a" {
		t.Fatalf("lock key %q, %v; want a's value under the RedisLock's default name", got, err)
	}
	if err := e.Lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
}
