package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// Two namespaces share a ClusterRedisConnection with spec.tenantSecretName,
// each with the Redis user docs/security.md has the admin create (its
// `redislock tenant-acl | xargs redis-cli ACL SETUSER` line, run as
// written). Agents that run with exactly the rights the docs grant (no
// Secret of the connection's secretNamespace) elect a leader in shop with
// shop's user, and the controller shows it with the admin credentials.
// shop's credentials, as a pod of shop reads them, get NOPERM on billing's
// lock key, a Global name, the controller's leader key and FLUSHALL;
// billing's lock keeps its holder. With the shared password a candidate
// had before, each of those SETs succeeded.
func TestTenantUsersKeepNamespacesApartInRedis(t *testing.T) {
	shop, billing, secrets := newNamespace(t), newNamespace(t), newNamespace(t)
	const adminPassword = "admin-pw"
	s := redistest.Start(t, redisproc.Options{Password: adminPassword})
	ctx := context.Background()
	admin := adminClient(t)
	clusterID := clusterIDOf(t, apiServer(t))
	bin := goBuild(t, ".")
	host, port, _ := strings.Cut(s.Addr, ":")
	for _, ns := range []string{shop, billing} {
		pw := "pw-" + ns
		// docs/security.md's lines, with the test server's address and
		// the admin password.
		line := bin + ` tenant-acl -namespace ` + ns + ` -cluster-id ` + clusterID +
			` | xargs -d '\n' redis-cli -h ` + host + ` -p ` + port + ` --user default --pass ` + adminPassword +
			` --no-auth-warning ACL SETUSER ` + redisconn.TenantUser(ns) + ` reset on ">$PASSWORD"`
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(cmd.Environ(), "PASSWORD="+pw)
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "OK" {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		mustKubectl(t, "create", "secret", "generic", "redis-tenant", "-n", ns, "--from-literal=username="+redisconn.TenantUser(ns), "--from-literal=password="+pw)
	}
	mustKubectl(t, "create", "secret", "generic", "redis-admin", "-n", secrets, "--from-literal=password="+adminPassword)
	conn := createClusterConnection(t, admin, "tenants-"+shop, v1alpha1.ClusterRedisConnectionSpec{
		RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "redis-admin", Key: "password"}},
		SecretNamespace:     secrets, TenantSecretName: "redis-tenant",
	})
	for _, ns := range []string{shop, billing} {
		rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"}, Spec: v1alpha1.RedisLockSpec{
			ConnectionRef: &v1alpha1.ConnectionRef{Kind: v1alpha1.KindClusterRedisConnection, Name: conn.Name},
			TTL:           &v1alpha1.Duration{Duration: 3 * time.Second},
		}}
		if err := admin.Create(ctx, rl); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, nil, "-watch-namespaces="+strings.Join([]string{shop, billing, secrets}, ","))

	// billing's lock, held by a candidate of billing with billing's user.
	billingClient := func(user, pw string) *redislock.Client {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: pw})
		t.Cleanup(func() { _ = rc.Close() })
		// AssumeDurable: no restart guard to wait out on the fresh server.
		c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "billing-pod", AssumeDurable: true})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	billingName := clusterID + "/" + billing + "/worker"
	held, err := billingClient(redisconn.TenantUser(billing), "pw-"+billing).Obtain(ctx, billingName, time.Minute)
	if err != nil {
		t.Fatalf("billing's candidate, with billing's user: %v", err)
	}
	t.Cleanup(func() { _ = held.Release(ctx) })

	// shop's agents, with the agent role and the connection reader only.
	kubeconfig := agentUser(t, shop, "redis-tenant")
	reader := filepath.Join(repoRoot, "config", "rbac", "agent", "clusterconnection_reader.yaml")
	mustKubectl(t, "apply", "-f", reader)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "--ignore-not-found", "-f", reader) })
	mustKubectl(t, "create", "clusterrolebinding", "reader-"+shop, "--clusterrole=redislock-clusterconnection-reader", "--user=agent-"+shop)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrolebinding", "reader-"+shop) })
	fl, _, p := startAgents(t, shop, "worker", kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			for id, addr := range fl.addrs() {
				st, code, err := leaderhttp.Get(ctx, "http://"+addr+"/leader")
				t.Logf("%s /leader: %d %+v %v", id, code, st, err)
			}
		}
	})
	leader := p.waitLeader(t, "", 60*time.Second)
	waitUntil(t, 30*time.Second, "the controller to show shop's leader", func() bool {
		out, _ := kubectl(t, "get", "redislock", "-n", shop, "worker", "-o", "jsonpath={.status.holderIdentity}")
		return out == leader
	})

	// A pod of shop with shop's credentials.
	mallory := redis.NewClient(&redis.Options{Addr: s.Addr, Username: redisconn.TenantUser(shop), Password: "pw-" + shop})
	t.Cleanup(func() { _ = mallory.Close() })
	for _, key := range []string{
		redislock.DefaultKeyPrefix + "{" + billingName + "}",
		redislock.DefaultKeyPrefix + "{global/orders}",
		redislock.DefaultKeyPrefix + "{" + clusterID + "/" + secrets + "/redislock-controller}",
	} {
		if err := mallory.Set(ctx, key, "v1:stolen:mallory", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("SET %s with shop's user: %v; want NOPERM", key, err)
		}
	}
	if err := mallory.FlushAll(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("FLUSHALL with shop's user: %v; want NOPERM", err)
	}
	if err := held.Refresh(ctx); err != nil {
		t.Errorf("billing's holder after shop's attempts: %v; want still held", err)
	}
	waitUntil(t, 30*time.Second, "the controller to show billing's holder", func() bool {
		out, _ := kubectl(t, "get", "redislock", "-n", billing, "worker", "-o", "jsonpath={.status.holderIdentity}")
		return out == "billing-pod"
	})
}
