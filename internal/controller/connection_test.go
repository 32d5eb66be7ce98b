package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// onConnection returns redisLock(ns, name, ...) naming connection kind/name
// instead of an inline spec.redis.
func onConnection(ns, name string, kind v1alpha1.ConnectionKind, conn string) *v1alpha1.RedisLock {
	rl := redisLock(ns, name, v1alpha1.ModeStandalone, "unused:1")
	rl.Spec.Redis, rl.Spec.ConnectionRef = nil, &v1alpha1.ConnectionRef{Kind: kind, Name: conn}
	return rl
}

// A RedisLock on a RedisConnection of its namespace, whose password Secret
// is there: it waits for the connection (ConnectionNotFound), then shows the
// holder and which connection it used.
func TestLockOnRedisConnection(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "pw"})
	ns := namespace(t)
	rl := onConnection(ns, "shared-1", v1alpha1.KindRedisConnection, "main")
	create(t, rl)
	got := waitLock(t, rl, 5*time.Second, "ConnectionNotFound", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonConnectionNotFound))
	if msg := condition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "RedisConnection "+ns+"/main not found") {
		t.Fatalf("Ready message %q does not name the missing connection", msg)
	}
	create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auth"}, Data: map[string][]byte{"password": []byte("pw")}},
		&v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: v1alpha1.RedisConnectionSpec{
			Addrs: []string{s.Addr}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "auth", Key: "password"},
		}})
	if _, err := holder(t, "pod-a", s).Obtain(context.Background(), lockIn(ns)+"/shared-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	got = waitLock(t, rl, 10*time.Second, "the holder, through the connection", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-a" })
	if got.Status.Connection != "RedisConnection/main" || condition(got, v1alpha1.ConditionReady).Status != metav1.ConditionTrue {
		t.Fatalf("status %+v; want Ready with connection RedisConnection/main", got.Status)
	}

	// Another namespace's lock cannot use it: a RedisConnection serves
	// its own namespace.
	other := onConnection(namespace(t), "shared-1", v1alpha1.KindRedisConnection, "main")
	create(t, other)
	waitLock(t, other, 5*time.Second, "ConnectionNotFound in another namespace", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonConnectionNotFound))
}

// A working lock's reconciles read its connection from the manager's
// cache and its Secret from the controller's, sending the API server no
// read of either: at 10,000 locks, uncached reads at each resync were about
// 670 requests a second while nothing changed.
func TestWorkingLockReadsNeitherConnectionNorSecretFromTheAPIServer(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "pw"})
	ns := namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auth"}, Data: map[string][]byte{"password": []byte("pw")}}
	conn := &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: v1alpha1.RedisConnectionSpec{
		Addrs: []string{s.Addr}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "auth", Key: "password"},
	}}
	rl := onConnection(ns, "cached", v1alpha1.KindRedisConnection, "main")
	create(t, secret, conn, rl)
	waitLock(t, rl, 10*time.Second, "Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	n, r0 := requests.count(), len(requests.reconciles(client.ObjectKeyFromObject(rl)))
	waitReconciles(t, rl, r0, 2, 4*resync) // two resyncs
	if got := requests.since(n, client.ObjectKeyFromObject(conn)); !slices.Contains(got, reqGet) || slices.Contains(got, reqAPIGet) {
		t.Errorf("reads of the connection over two resyncs: %q; want cache reads (get) only", got)
	}
	if got := requests.since(n, client.ObjectKeyFromObject(secret)); slices.Contains(got, reqAPIGet) {
		t.Errorf("reads of the Secret over two resyncs: %q; want none from the API server (it is read again after %v)", got, controller.SecretRefresh)
	}
}

// A ClusterRedisConnection serves locks of any namespace, with its Secrets
// in its secretNamespace; without secretNamespace the API server refuses a
// connection that names Secrets.
func TestLockOnClusterRedisConnection(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "pw"})
	secrets, ns := namespace(t), namespace(t)
	ctx := context.Background()
	name := "shared-" + secrets
	spec := v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "auth", Key: "password"}}
	err := k8s.Create(ctx, &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterRedisConnectionSpec{RedisConnectionSpec: spec}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "secretNamespace is required") {
		t.Fatalf("a ClusterRedisConnection naming Secrets without secretNamespace: %v; want Invalid saying secretNamespace is required", err)
	}
	conn := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterRedisConnectionSpec{RedisConnectionSpec: spec, SecretNamespace: secrets}}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: "auth"}, Data: map[string][]byte{"password": []byte("pw")}}, conn)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), conn) })

	rl := onConnection(ns, "l", v1alpha1.KindClusterRedisConnection, name)
	create(t, rl)
	if _, err := holder(t, "pod-b", s).Obtain(ctx, lockIn(ns)+"/l", time.Minute); err != nil {
		t.Fatal(err)
	}
	got := waitLock(t, rl, 10*time.Second, "the holder, through the cluster connection", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-b" })
	if got.Status.Connection != "ClusterRedisConnection/"+name {
		t.Fatalf("status.connection %q; want ClusterRedisConnection/%s", got.Status.Connection, name)
	}

	// Its servers cannot change under the locks on it.
	// A patch: the controller writes the connection's finalizer meanwhile.
	edited := conn.DeepCopy()
	edited.Spec.Addrs = []string{"127.0.0.1:1"}
	if err := k8s.Patch(ctx, edited, client.MergeFrom(conn)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "addrs cannot be changed") {
		t.Fatalf("changing a connection's addrs: %v; want Invalid saying addrs cannot be changed", err)
	}
}

// A lock names exactly one connection, and keeps it.
func TestConnectionRefRules(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	both := redisLock(ns, "both", v1alpha1.ModeStandalone, "redis:6379")
	both.Spec.ConnectionRef = &v1alpha1.ConnectionRef{Name: "main"}
	if err := k8s.Create(ctx, both); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "set exactly one of redis") {
		t.Fatalf("redis and connectionRef both set: %v; want Invalid saying set exactly one", err)
	}
	rl := onConnection(ns, "keeps", v1alpha1.KindRedisConnection, "main")
	create(t, rl)
	for what, edit := range map[string]func(*v1alpha1.RedisLockSpec){
		"changing connectionRef": func(s *v1alpha1.RedisLockSpec) { s.ConnectionRef.Name = "other" },
		"replacing connectionRef by spec.redis": func(s *v1alpha1.RedisLockSpec) {
			s.ConnectionRef, s.Redis = nil, &v1alpha1.RedisConnectionSpec{Addrs: []string{"redis:6379"}}
		},
	} {
		// A patch, not an update: the controller writes the status
		// meanwhile.
		var got v1alpha1.RedisLock
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(rl), &got); err != nil {
			t.Fatal(err)
		}
		edited := got.DeepCopy()
		edit(&edited.Spec)
		if err := k8s.Patch(ctx, edited, client.MergeFrom(&got)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "connectionRef cannot be changed") {
			t.Fatalf("%s: %v; want Invalid saying it cannot be changed", what, err)
		}
	}
}

// A RedisConnection works in each Redis mode: a lock on it shows the
// holder that a client of those servers obtained.
func TestConnectionsInEveryMode(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t, redisproc.Options{})
	nodes := redistest.StartN(t, 3)
	master := redistest.Start(t, redisproc.Options{})
	sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr})
	clusterAddrs := redistest.StartCluster(t, 3)
	ns := namespace(t)
	cc := redistest.ClusterClient(t, clusterAddrs)
	clusterHolder, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: "pod-Cluster"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode   v1alpha1.RedisMode
		spec   v1alpha1.RedisConnectionSpec
		holder *redislock.Client
	}{
		{v1alpha1.ModeStandalone, v1alpha1.RedisConnectionSpec{Addrs: []string{single.Addr}}, holder(t, "pod-Standalone", single)},
		{v1alpha1.ModeRedlock, v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeRedlock, Addrs: []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}}, holder(t, "pod-Redlock", nodes...)},
		{v1alpha1.ModeSentinel, v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeSentinel, MasterName: "mymaster", Addrs: []string{sentinel.Addr}}, holder(t, "pod-Sentinel", master)},
		{v1alpha1.ModeCluster, v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeCluster, Addrs: clusterAddrs}, clusterHolder},
	} {
		name := strings.ToLower(string(tc.mode))
		create(t, &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tc.spec})
		rl := onConnection(ns, "on-"+name, v1alpha1.KindRedisConnection, name)
		create(t, rl)
		if _, err := tc.holder.Obtain(ctx, lockIn(ns)+"/on-"+name, time.Minute); err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		got := waitLock(t, rl, 10*time.Second, string(tc.mode)+" holder through the connection", func(got *v1alpha1.RedisLock) bool {
			return got.Status.HolderIdentity == "pod-"+string(tc.mode)
		})
		if tc.mode == v1alpha1.ModeRedlock && len(got.Status.Nodes) != 3 {
			t.Fatalf("Redlock through a connection: status.nodes %+v; want the 3 nodes", got.Status.Nodes)
		}
	}
}

// A connection in use cannot go: its deletion waits, with an event naming
// the RedisLocks on it, until they are gone, so that it cannot be created
// again with other servers under their candidates. An unused one goes at
// once.
func TestConnectionInUseWaitsForItsLocks(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	finalizer := controller.ConnectionFinalizer("", nil)
	unused := &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unused"}, Spec: v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}}}
	used := &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "used"}, Spec: v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}}}
	cluster := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: "used-" + ns}, Spec: v1alpha1.ClusterRedisConnectionSpec{RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}}}}
	onUsed, onCluster := onConnection(ns, "on-used", v1alpha1.KindRedisConnection, "used"), onConnection(ns, "on-cluster", v1alpha1.KindClusterRedisConnection, cluster.Name)
	create(t, unused, used, cluster, onUsed, onCluster)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cluster) })
	for _, c := range []client.Object{used, cluster} {
		waitFor(t, 10*time.Second, "the finalizer on "+c.GetName(), func() (bool, any) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c)
			return err == nil && slices.Contains(c.GetFinalizers(), finalizer), c.GetFinalizers()
		})
	}
	// Cost: one patch per change of use, none for another lock on a
	// connection in use (and the protection never requeues itself).
	n0 := len(requests.reconciles(client.ObjectKeyFromObject(used)))
	second := onConnection(ns, "on-used-2", v1alpha1.KindRedisConnection, "used")
	create(t, second)
	waitReconciles(t, used, n0, 1, 10*time.Second)
	if got := countWrites(requests.reconciles(client.ObjectKeyFromObject(used)), reqPatch); got != 1 {
		t.Fatalf("%d patches of the connection for two locks on it; want 1, the finalizer", got)
	}
	if err := k8s.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, unused); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the unused connection gone", func() (bool, any) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(unused), unused)
		return apierrors.IsNotFound(err), err
	})
	for _, c := range []client.Object{used, cluster} {
		if err := k8s.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, ns, "used", controller.EventConnectionInUse)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(used), used); err != nil || used.DeletionTimestamp.IsZero() {
		t.Fatalf("the connection in use: %v, deletionTimestamp %v; want it there, being deleted", err, used.DeletionTimestamp)
	}
	for _, pair := range []struct {
		lock *v1alpha1.RedisLock
		conn client.Object
	}{{onUsed, used}, {onCluster, cluster}} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pair.conn), pair.conn); err != nil {
			t.Fatalf("%s went while %s used it: %v", pair.conn.GetName(), pair.lock.Name, err)
		}
		if err := k8s.Delete(ctx, pair.lock); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, pair.conn.GetName()+" gone after its lock", func() (bool, any) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pair.conn), pair.conn)
			return apierrors.IsNotFound(err), err
		})
	}
}

// A ClusterRedisConnection with allowedNamespaces serves only the locks of
// those namespaces; the others are told why.
func TestClusterRedisConnectionAllowedNamespaces(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	in, out := namespace(t), namespace(t)
	conn := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: "allowed-" + in}, Spec: v1alpha1.ClusterRedisConnectionSpec{
		RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}}, AllowedNamespaces: []string{in},
	}}
	create(t, conn)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), conn) })
	allowed, refused := onConnection(in, "l", v1alpha1.KindClusterRedisConnection, conn.Name), onConnection(out, "l", v1alpha1.KindClusterRedisConnection, conn.Name)
	create(t, allowed, refused)
	waitLock(t, allowed, 10*time.Second, "Ready in an allowed namespace", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	got := waitLock(t, refused, 10*time.Second, "InvalidSpec elsewhere", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInvalidSpec))
	if msg := condition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "does not allow namespace "+out) {
		t.Fatalf("Ready message %q does not say the namespace is not allowed", msg)
	}
}

// Only the locks a ClusterRedisConnection serves pin it: a lock in a
// namespace it does not allow puts no finalizer on it (so a tenant cannot
// block an admin's deletion), a lock it serves does, and narrowing
// allowedNamespaces away from that lock lets the connection go.
func TestClusterRedisConnectionPinnedOnlyByLocksItServes(t *testing.T) {
	in, out := namespace(t), namespace(t)
	ctx := context.Background()
	finalizer := controller.ConnectionFinalizer("", nil)
	conn := &v1alpha1.ClusterRedisConnection{ObjectMeta: metav1.ObjectMeta{Name: "pinned-" + in}, Spec: v1alpha1.ClusterRedisConnectionSpec{
		RedisConnectionSpec: v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:1"}}, AllowedNamespaces: []string{in},
	}}
	create(t, conn)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), conn) })
	finalizers := func() (bool, any) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn)
		return err == nil && slices.Contains(conn.Finalizers, finalizer), conn.Finalizers
	}

	n0 := len(requests.reconciles(client.ObjectKeyFromObject(conn)))
	foreign := onConnection(out, "foreign", v1alpha1.KindClusterRedisConnection, conn.Name)
	create(t, foreign)
	waitLock(t, foreign, 10*time.Second, "InvalidSpec in a namespace the connection does not allow", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInvalidSpec))
	waitReconciles(t, conn, n0, 1, 10*time.Second)
	if pinned, got := finalizers(); pinned {
		t.Fatalf("a lock of namespace %s, which the connection does not allow, pinned it: finalizers %v", out, got)
	}

	served := onConnection(in, "served", v1alpha1.KindClusterRedisConnection, conn.Name)
	create(t, served)
	waitFor(t, 10*time.Second, "the finalizer of the lock the connection serves", finalizers)

	conn.Spec.AllowedNamespaces = []string{"elsewhere"}
	if err := k8s.Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "no finalizer once no lock it serves names it", func() (bool, any) {
		pinned, got := finalizers()
		return !pinned, got
	})
	if err := k8s.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the connection gone, though two locks name it", func() (bool, any) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn)
		return apierrors.IsNotFound(err), err
	})
}
