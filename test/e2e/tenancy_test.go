package e2e

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// applyTenancy applies config/policy/tenancy.yaml for t, each policy and
// binding renamed for ns and each binding limited to the objects of ns (and
// cluster-scoped ones, which a namespace selector never skips), so that
// other tests' objects are left alone. It returns once the Secret policy
// refuses a dry run of user's: the API server takes a moment to load a new
// policy.
func applyTenancy(t *testing.T, ns string, user client.Client) {
	t.Helper()
	var out []string
	for _, doc := range docs(readFile(t, filepath.Join(repoRoot, "config", "policy", "tenancy.yaml"))) {
		meta := doc["metadata"].(map[string]any)
		meta["name"] = meta["name"].(string) + "-" + ns
		spec := doc["spec"].(map[string]any)
		if doc["kind"] == "ValidatingAdmissionPolicyBinding" {
			spec["policyName"] = spec["policyName"].(string) + "-" + ns
			spec["matchResources"] = map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}}
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	manifest := strings.Join(out, "---\n")
	if res, err := kubectlIn(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the tenancy policies: %v\n%s", err, res)
	}
	t.Cleanup(func() { _, _ = kubectlIn(t, manifest, "delete", "--ignore-not-found", "-f", "-") })
	mustKubectl(t, "create", "secret", "generic", "-n", ns, "policy-probe", "--from-literal=password=x")
	probe := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{
		Addrs: []string{"127.0.0.1:1"}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "policy-probe", Key: "password"},
	}}}
	// Each policy takes effect on its own: beside two busy loops, a Global
	// lock was admitted after the Secret policy had taken effect.
	global := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe-global"}, Spec: v1alpha1.RedisLockSpec{
		Scope: v1alpha1.ScopeGlobal, LockName: "policy-probe", Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}},
	}}
	waitUntil(t, 30*time.Second, "the tenancy policies to take effect", func() bool {
		return user.Create(context.Background(), probe.DeepCopy(), client.DryRunAll) != nil &&
			user.Create(context.Background(), global.DeepCopy(), client.DryRunAll) != nil
	})
}

// tenant returns a client of user "tenant@<ns>", who may create, update
// and read RedisLocks and RedisConnections in ns, and nothing else: no
// Secrets. More grants can be bound to the same user.
func tenant(t *testing.T, ns string) (client.Client, string) {
	t.Helper()
	user := "tenant@" + ns
	admin := adminClient(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-author"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"redislocks", "redisconnections"},
		Verbs: []string{"create", "update", "patch", "get", "list", "watch"},
	}}}
	grant(t, admin, role, user)
	cfg := rest.CopyConfig(apiServer(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, user
}

// grant creates role (a Role, in its namespace) and binds it to user.
func grant(t *testing.T, admin client.Client, role *rbacv1.Role, user string) {
	t.Helper()
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func adminClient(t *testing.T) client.Client {
	t.Helper()
	c, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder is a tenant's fake Redis: it accepts connections and keeps all
// they send, answering nothing.
type recorder struct {
	ln   net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					r.mu.Lock()
					r.seen.Write(buf[:n])
					r.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return r
}

func (r *recorder) addr() string { return r.ln.Addr().String() }

func (r *recorder) received(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.seen.Bytes(), []byte(s))
}

// A user who may create RedisLocks and RedisConnections in a namespace,
// but may not get its Secrets, cannot have the controller read one and
// send it to a server of theirs: every object that names such a Secret, by
// any of its six references, is refused at admission with the reason, and
// so is an update that repoints an admin's lock at such a Secret or turns
// off its certificate checks. What the user may do stays possible: a lock
// on an admin's connection, an update of an admin's lock's timing, and a
// Secret they were granted get on. The controller runs throughout, and the
// tenant's server never receives the Secret's value.
func TestTenantCannotSendASecretToTheirServer(t *testing.T) {
	ns := newNamespace(t)
	admin := adminClient(t)
	asTenant, user := tenant(t, ns)
	evil := startRecorder(t)
	secretValue := "db-admin-password-" + ns
	mustKubectl(t, "create", "secret", "generic", "-n", ns, "db-admin", "--from-literal=password="+secretValue, "--from-literal=user=admin")
	s := redistest.Start(t, redisproc.Options{Password: "redis-pass-" + ns})
	mustKubectl(t, "create", "secret", "generic", "-n", ns, "redis-auth", "--from-literal=password=redis-pass-"+ns)
	mustKubectl(t, "create", "secret", "generic", "-n", ns, "tenant-own", "--from-literal=password=redis-pass-"+ns)
	startController(t, nil, "-watch-namespaces="+ns)
	applyTenancy(t, ns, asTenant)

	ctx := context.Background()
	ref := func(name string) *v1alpha1.SecretKeyRef { return &v1alpha1.SecretKeyRef{Name: name, Key: "password"} }
	evilSpec := func(edit func(*v1alpha1.RedisConnectionSpec)) *v1alpha1.RedisConnectionSpec {
		c := &v1alpha1.RedisConnectionSpec{Addrs: []string{evil.addr()}}
		edit(c)
		return c
	}
	lock := func(name string, c *v1alpha1.RedisConnectionSpec) *v1alpha1.RedisLock {
		return &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.RedisLockSpec{Redis: c}}
	}
	refusal := "user " + user + " may not get Secret " + ns + "/db-admin"
	var admitted []string
	for _, tc := range []struct {
		name string
		obj  client.Object
	}{
		{"a lock's passwordSecretRef", lock("password", evilSpec(func(c *v1alpha1.RedisConnectionSpec) { c.PasswordSecretRef = ref("db-admin") }))},
		{"a lock's usernameSecretRef", lock("username", evilSpec(func(c *v1alpha1.RedisConnectionSpec) { c.UsernameSecretRef = ref("db-admin") }))},
		{"a lock's tls.caSecretRef", lock("ca", evilSpec(func(c *v1alpha1.RedisConnectionSpec) {
			c.TLS = &v1alpha1.RedisTLS{CASecretRef: ref("db-admin")}
		}))},
		{"a lock's tls.certSecretRef", lock("cert", evilSpec(func(c *v1alpha1.RedisConnectionSpec) {
			c.TLS = &v1alpha1.RedisTLS{CertSecretRef: &v1alpha1.SecretRef{Name: "db-admin"}}
		}))},
		{"a lock's Sentinel credentials", lock("sentinel", evilSpec(func(c *v1alpha1.RedisConnectionSpec) {
			c.Mode, c.MasterName = v1alpha1.ModeSentinel, "m"
			c.SentinelPasswordSecretRef = ref("db-admin")
		}))},
		{"a RedisConnection's passwordSecretRef", &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
			Spec: *evilSpec(func(c *v1alpha1.RedisConnectionSpec) { c.PasswordSecretRef = ref("db-admin") })}},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			err := asTenant.Create(ctx, tc.obj)
			if err == nil {
				admitted = append(admitted, tc.obj.GetName())
				t.Fatalf("admitted; want it refused with %q", refusal)
			}
			if !strings.Contains(err.Error(), refusal) || !strings.Contains(err.Error(), "redislock-secret-access") {
				t.Fatalf("refused with %v; want the reason %q and the policy's name", err, refusal)
			}
		})
	}
	// A lock on the RedisConnection an admin made is the tenant's to make:
	// its Secret is the admin's choice, sent to the admin's server.
	shared := &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: ref("redis-auth")}}
	if err := admin.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	onShared := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-shared"},
		Spec: v1alpha1.RedisLockSpec{ConnectionRef: &v1alpha1.ConnectionRef{Name: "shared"}}}
	if err := asTenant.Create(ctx, onShared); err != nil {
		t.Fatalf("a lock on an admin's connection: %v", err)
	}
	// So is the timing of an admin's lock; not where its Secret goes.
	admins := lock("admins", &v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: ref("redis-auth")})
	if err := admin.Create(ctx, admins); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, refusal string
		edit          func(*v1alpha1.RedisLock)
	}{
		{"its ttl", "", func(rl *v1alpha1.RedisLock) { rl.Spec.TTL = &v1alpha1.Duration{Duration: 20 * time.Second} }},
		{"its passwordSecretRef to a Secret the tenant may not get", refusal, func(rl *v1alpha1.RedisLock) { rl.Spec.Redis.PasswordSecretRef = ref("db-admin") }},
		// The same Secret, another of its values: before, only names were
		// compared, and these were admitted.
		{"its passwordSecretRef's key", "may not get Secret " + ns + "/redis-auth", func(rl *v1alpha1.RedisLock) { rl.Spec.Redis.PasswordSecretRef.Key = "user" }},
		{"its Secret moved from passwordSecretRef to usernameSecretRef", "may not get Secret " + ns + "/redis-auth", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.UsernameSecretRef, rl.Spec.Redis.PasswordSecretRef = rl.Spec.Redis.PasswordSecretRef, nil
		}},
		{"its certificate checks off", "may not get Secret " + ns + "/redis-auth", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.TLS = &v1alpha1.RedisTLS{InsecureSkipVerify: new(true)}
		}},
	} {
		t.Run("update of an admin's lock/"+tc.name, func(t *testing.T) {
			// The controller's status writes move the resourceVersion.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var rl v1alpha1.RedisLock
				if err := asTenant.Get(ctx, client.ObjectKeyFromObject(admins), &rl); err != nil {
					return err
				}
				tc.edit(&rl)
				return asTenant.Update(ctx, &rl)
			})
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("got %v; want refused with %q", err, tc.refusal)
			}
		})
	}
	// A Secret the tenant was granted get on is theirs to name.
	grant(t, admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-secret"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"tenant-own"}, Verbs: []string{"get"},
	}}}, user)
	own := lock("own", &v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: ref("tenant-own")})
	waitUntil(t, 30*time.Second, "a lock naming a Secret the tenant may get admitted", func() bool {
		return asTenant.Create(ctx, own.DeepCopy()) == nil
	})

	if len(admitted) > 0 {
		// Show what the guard prevents: the controller sends the value.
		waitUntil(t, 30*time.Second, "the tenant's server to receive the Secret (admitted: "+strings.Join(admitted, ", ")+")", func() bool {
			return evil.received(secretValue)
		})
		t.Fatalf("the tenant's server received the value of Secret db-admin, through %v", admitted)
	}
	for _, name := range []string{"on-shared", "own", "admins"} {
		waitUntil(t, 30*time.Second, "RedisLock "+name+" Ready", func() bool {
			out, _ := kubectl(t, "get", "-n", ns, "redislock", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return out == "True"
		})
	}
	if evil.received(secretValue) {
		t.Fatal("the tenant's server received the value of Secret db-admin")
	}
}

// A ClusterRedisConnection's Secrets are in its secretNamespace: a user who
// may create ClusterRedisConnections but not get Secrets there is refused,
// naming the Secret's namespace.
func TestClusterConnectionAuthorNeedsTheSecret(t *testing.T) {
	ns := newNamespace(t)
	admin := adminClient(t)
	asTenant, _ := tenant(t, ns)
	applyTenancy(t, ns, asTenant)
	mustKubectl(t, "create", "secret", "generic", "-n", ns, "db-admin", "--from-literal=password=x")
	user := "platform@" + ns
	name := "cluster-author-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterredisconnections"}, Verbs: []string{"create"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(apiServer(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	asPlatform, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: "evil-" + ns}, Spec: v1alpha1.ClusterRedisConnectionSpec{
		RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "db-admin", Key: "password"}},
		SecretNamespace:     ns,
	}}
	err = asPlatform.Create(context.Background(), conn)
	if err == nil {
		_ = admin.Delete(context.Background(), conn)
	}
	if want := "user " + user + " may not get Secret " + ns + "/db-admin"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("create: %v; want refused with %q", err, want)
	}
}

// Scope Global is a grant: a tenant's Global lock is refused, naming the
// grant, until an admin binds the verb use on globallocknames.redislock.io
// for its lockName; that grant covers the names it lists and no other.
func TestGlobalScopeNeedsAGrant(t *testing.T) {
	ns := newNamespace(t)
	asTenant, user := tenant(t, ns)
	applyTenancy(t, ns, asTenant)
	global := func(name string) *v1alpha1.RedisLock {
		return &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.RedisLockSpec{
			Scope: v1alpha1.ScopeGlobal, LockName: name, Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}},
		}}
	}
	ctx := context.Background()
	refusal := func(name string) string {
		return "needs a grant: user " + user + " may not use globallocknames.redislock.io " + name + " in namespace " + ns
	}
	if err := asTenant.Create(ctx, global("billing")); err == nil || !strings.Contains(err.Error(), refusal("billing")) {
		t.Fatalf("a Global lock without the grant: %v; want refused with %q", err, refusal("billing"))
	}
	// scope Cluster needs none.
	if err := asTenant.Create(ctx, &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}}}}); err != nil {
		t.Fatalf("a lock of scope Cluster: %v", err)
	}
	grant(t, adminClient(t), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "global-billing"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"globallocknames"}, ResourceNames: []string{"billing"}, Verbs: []string{"use"},
	}}}, user)
	waitUntil(t, 30*time.Second, "the granted Global lock admitted", func() bool {
		return asTenant.Create(ctx, global("billing")) == nil
	})
	if err := asTenant.Create(ctx, global("payroll")); err == nil || !strings.Contains(err.Error(), refusal("payroll")) {
		t.Fatalf("a Global name the grant does not list: %v; want refused with %q", err, refusal("payroll"))
	}
}

// Whatever frees a Global name for everyone needs the grant that creating
// one needs: on an admin's Global lock in her namespace, a tenant who may
// update and delete RedisLocks but was not granted the name may neither
// annotate a force-release, nor turn deletionPolicy to Release, nor delete
// it once it is Release; she may still change its timing. Once granted the
// name, she may force-release it. Before, the grant was checked on create
// only, and a tenant refused the name freed another namespace's holder.
func TestGlobalGrantCoversForceReleaseAndRelease(t *testing.T) {
	ns := newNamespace(t)
	asTenant, user := tenant(t, ns)
	admin := adminClient(t)
	grant(t, admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-deleter"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"redislocks"}, Verbs: []string{"delete"},
	}}}, user)
	applyTenancy(t, ns, asTenant)
	ctx := context.Background()
	orders := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: v1alpha1.RedisLockSpec{
		Scope: v1alpha1.ScopeGlobal, LockName: "orders", Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}},
	}}
	if err := admin.Create(ctx, orders); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(orders)
	refused := func(what string) string {
		return what + " shares the name orders with every namespace and cluster on the same Redis, so it needs a grant: user " + user + " may not use globallocknames.redislock.io orders in namespace " + ns
	}
	update := func(c client.Client, change func(*v1alpha1.RedisLock)) error {
		var rl v1alpha1.RedisLock
		if err := c.Get(ctx, key, &rl); err != nil {
			t.Fatal(err)
		}
		change(&rl)
		return c.Update(ctx, &rl)
	}
	forceRelease := func(rl *v1alpha1.RedisLock) {
		rl.Annotations = map[string]string{"redislock.io/force-release": time.Now().Format(time.RFC3339Nano)}
	}
	if err := update(asTenant, forceRelease); err == nil || !strings.Contains(err.Error(), refused("a force-release of a Global lock")) {
		t.Fatalf("a force-release of a Global lock without the grant: %v; want refused with %q", err, refused("a force-release of a Global lock"))
	}
	toRelease := func(rl *v1alpha1.RedisLock) { rl.Spec.DeletionPolicy = v1alpha1.DeletionRelease }
	if err := update(asTenant, toRelease); err == nil || !strings.Contains(err.Error(), refused("deletionPolicy Release on a Global lock")) {
		t.Fatalf("deletionPolicy Release on a Global lock without the grant: %v; want refused with %q", err, refused("deletionPolicy Release on a Global lock"))
	}
	if err := update(asTenant, func(rl *v1alpha1.RedisLock) { rl.Spec.TTL = &v1alpha1.Duration{Duration: 20 * time.Second} }); err != nil {
		t.Fatalf("a change of a Global lock's timing: %v; want it admitted", err)
	}
	if err := update(admin, toRelease); err != nil {
		t.Fatal(err)
	}
	if err := asTenant.Delete(ctx, orders.DeepCopy()); err == nil || !strings.Contains(err.Error(), refused("deleting a Global lock with deletionPolicy Release")) {
		t.Fatalf("deleting a Global lock with deletionPolicy Release without the grant: %v; want refused with %q", err, refused("deleting a Global lock with deletionPolicy Release"))
	}
	grant(t, admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "global-orders"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"globallocknames"}, ResourceNames: []string{"orders"}, Verbs: []string{"use"},
	}}}, user)
	waitUntil(t, 30*time.Second, "the granted force-release admitted", func() bool { return update(asTenant, forceRelease) == nil })
}

// A RedisLock may name a ClusterRedisConnection only from a namespace the
// connection allows: refused at admission otherwise, naming the
// connection's allowed namespaces. A lock the connection served pins it
// only while it does: once an admin narrows allowedNamespaces away from the
// lock, the real controller drops its finalizer and the connection can go.
func TestClusterConnectionServesOnlyItsNamespaces(t *testing.T) {
	ns := newNamespace(t)
	admin := adminClient(t)
	asTenant, _ := tenant(t, ns)
	applyTenancy(t, ns, asTenant)
	s := redistest.Start(t, redisproc.Options{})
	startController(t, nil, "-watch-namespaces="+ns)
	ctx := context.Background()
	conn := func(name string, allowed ...string) *v1alpha1.ClusterRedisConnection {
		return createClusterConnection(t, admin, name+"-"+ns, v1alpha1.ClusterRedisConnectionSpec{
			RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}}, AllowedNamespaces: allowed,
		})
	}
	narrow, wide := conn("narrow", "elsewhere"), conn("wide", ns)
	on := func(c *v1alpha1.ClusterRedisConnection) *v1alpha1.RedisLock {
		return &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-" + strings.TrimSuffix(c.Name, "-"+ns)},
			Spec: v1alpha1.RedisLockSpec{ConnectionRef: &v1alpha1.ConnectionRef{Kind: v1alpha1.KindClusterRedisConnection, Name: c.Name}}}
	}
	want := "ClusterRedisConnection " + narrow.Name + " does not allow namespace " + ns + " (its spec.allowedNamespaces: elsewhere)"
	if err := asTenant.Create(ctx, on(narrow)); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a lock on a connection that does not allow its namespace: %v; want refused with %q", err, want)
	}
	if err := asTenant.Create(ctx, on(wide)); err != nil {
		t.Fatalf("a lock on a connection that allows its namespace: %v", err)
	}
	finalizer := controller.ConnectionFinalizer("", []string{ns})
	pinned := func() (bool, []string) {
		var got v1alpha1.ClusterRedisConnection
		if err := admin.Get(ctx, client.ObjectKeyFromObject(wide), &got); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(got.Finalizers, finalizer), got.Finalizers
	}
	waitUntil(t, 30*time.Second, "the finalizer of the lock the connection serves", func() bool { ok, _ := pinned(); return ok })
	var latest v1alpha1.ClusterRedisConnection
	if err := admin.Get(ctx, client.ObjectKeyFromObject(wide), &latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.AllowedNamespaces = []string{"elsewhere"}
	if err := admin.Update(ctx, &latest); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "no finalizer once the connection no longer serves the lock", func() bool { ok, _ := pinned(); return !ok })
	if err := admin.Delete(ctx, &latest); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the connection gone", func() bool {
		err := admin.Get(ctx, client.ObjectKeyFromObject(wide), &latest)
		return client.IgnoreNotFound(err) == nil && err != nil
	})
}

// Every Secret reference the CRDs have (any property whose name ends in
// SecretRef, at any depth of a RedisLock's spec.redis or a connection's
// spec) is checked by redislock-secret-access: compared whole on update,
// and authorized. A reference added to the API and forgotten here fails
// this test, rather than going unchecked.
func TestSecretPolicyCoversEverySecretReference(t *testing.T) {
	policy := readFile(t, filepath.Join(repoRoot, "config", "policy", "tenancy.yaml"))
	found := map[string]bool{}
	for file, path := range map[string][]string{
		"redislock.io_redislocks.yaml":              {"spec", "redis"},
		"redislock.io_redisconnections.yaml":        {"spec"},
		"redislock.io_clusterredisconnections.yaml": {"spec"},
	} {
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(repoRoot, "config", "crd", "bases", file))), &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			schema := v.Schema.OpenAPIV3Schema
			for _, p := range path {
				props, _ := schema["properties"].(map[string]any)
				schema, _ = props[p].(map[string]any)
			}
			if schema == nil {
				t.Fatalf("%s has no %s", file, strings.Join(path, "."))
			}
			schemaSecretRefs(schema, "", found)
		}
	}
	if len(found) < 6 {
		t.Fatalf("found only %v: the walk of the CRDs is broken", found)
	}
	for ref := range found {
		for _, want := range []string{
			"variables.conn.?" + ref + " == variables.oldConn.?" + ref,
			"variables.conn.?" + ref + ".name.hasValue()",
		} {
			if !strings.Contains(policy, want) {
				t.Errorf("redislock-secret-access does not check %s: it lacks %q", ref, want)
			}
		}
	}
}

// schemaSecretRefs adds to found the path (a.b.c) under prefix of every property
// of schema whose name ends in SecretRef.
func schemaSecretRefs(schema map[string]any, prefix string, found map[string]bool) {
	props, _ := schema["properties"].(map[string]any)
	for name, sub := range props {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if strings.HasSuffix(name, "SecretRef") {
			found[path] = true
			continue
		}
		if m, ok := sub.(map[string]any); ok {
			schemaSecretRefs(m, path, found)
		}
	}
}

// createClusterConnection creates the ClusterRedisConnection name with
// spec as admin, and deletes it when t ends, its finalizers dropped first
// (envtest runs no controller that would).
func createClusterConnection(t *testing.T, admin client.Client, name string, spec v1alpha1.ClusterRedisConnectionSpec) *v1alpha1.ClusterRedisConnection {
	t.Helper()
	ctx := context.Background()
	c := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := admin.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Get(ctx, client.ObjectKeyFromObject(c), c)
		c.Finalizers = nil
		_ = admin.Update(ctx, c)
		_ = admin.Delete(ctx, c)
	})
	return c
}
