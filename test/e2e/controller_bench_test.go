package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

const (
	// benchNamespaces is how many namespaces TestControllerBenchmark
	// spreads its RedisLocks over.
	benchNamespaces = 10
	// handoversPerMinute is the rate of the handovers that time the lag
	// and count the API requests under load.
	handoversPerMinute = 100
	// lagProbe takes over each sample lock from benchHolder.
	lagProbe    = "lag-probe"
	benchHolder = "bench-holder"
	// benchLabel marks the benchmark's RedisLocks for its watch; its value
	// names the run.
	benchLabel = "redislock.io/bench"
	// benchResync is the controller's -resync, its default.
	benchResync = 30 * time.Second
	// benchPassword is the Redis password every backend requires, so that
	// each lock names a Secret.
	benchPassword = "s3cret"
)

// controllerResources are the API resources the controller reads or
// writes: its own kinds, the Secrets, and the Events it records.
var controllerResources = []string{"redislocks", "redisconnections", "clusterredisconnections", "secrets", "events"}

// TestControllerBenchmark runs the `redislock controller` binary (with its
// default -resync, 30s) on each backend of CONTROLLER_BENCH_BACKENDS, with
// each count of CONTROLLER_BENCH_LOCKS RedisLocks in benchNamespaces
// namespaces, and measures what it costs and how far its status trails
// Redis:
//   - how long from the controller's start, with the locks already there,
//     until every lock is Ready;
//   - the controller's memory at the end: VmRSS and VmHWM (peak) from
//     /proc, and the Go heap in use from its /metrics;
//   - API requests a minute (kube-apiserver's own apiserver_request_total
//     on controllerResources) over CONTROLLER_BENCH_WINDOW at idle, and
//     over as long again with handoversPerMinute handovers;
//   - the status lag of those handovers: the time from a holder's
//     Release to a watch on RedisLocks showing the next holder, which
//     started to obtain the lock as the release returned.
//
// Backends: single, one redis-server; cluster, a Redis Cluster of 3
// masters with a replica each (the locks in Cluster mode, waiting for
// their replica). Each count runs with a controller of its own, whose
// locks are deleted before the next. It prints a markdown table; `make
// bench` runs it.
//
//	CONTROLLER_BENCH_LOCKS    comma-separated counts of RedisLocks
//	                          (required; 1000,5000,10000 in make bench)
//	CONTROLLER_BENCH_BACKENDS single, cluster or both (default both)
//	CONTROLLER_BENCH_WINDOW   the idle window, and the handovers' (60s)
//	CONTROLLER_BENCH_JSON     a file to write the results to, for
//	                          test/bench/cmd/benchreport (optional)
//	CONTROLLER_BENCH_HEAP_DIR a directory for the controller's heap
//	                          profile at the end of each run
//	                          (heap-BACKEND-N.pb.gz; go tool pprof reads
//	                          it), served by its -pprof-bind-address
//	                          (optional)
func TestControllerBenchmark(t *testing.T) {
	locksEnv := os.Getenv("CONTROLLER_BENCH_LOCKS")
	if locksEnv == "" {
		t.Skip("CONTROLLER_BENCH_LOCKS is unset: the controller benchmark creates that many RedisLocks and takes minutes; run `make bench` or set CONTROLLER_BENCH_LOCKS=N[,N...]")
	}
	var counts []int
	for _, f := range strings.Split(locksEnv, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("CONTROLLER_BENCH_LOCKS=%q: want positive numbers, comma-separated", locksEnv)
		}
		counts = append(counts, n)
	}
	window, err := time.ParseDuration(envOr("CONTROLLER_BENCH_WINDOW", "60s"))
	if err != nil || window < 10*time.Second {
		t.Fatalf("CONTROLLER_BENCH_WINDOW=%q: want a duration of 10s or more", os.Getenv("CONTROLLER_BENCH_WINDOW"))
	}
	backends := strings.Split(envOr("CONTROLLER_BENCH_BACKENDS", "single,cluster"), ",")
	out := benchresult.ControllerScale{Namespaces: benchNamespaces, Resync: benchResync.String(), Window: window.String(), HandoversPerMinute: handoversPerMinute}
	fmt.Printf("\nThe controller (-resync %v): Ready after its start; API requests a minute over %v idle, then over %v of %d handovers a minute, whose lag is timed\n\n", benchResync, window, window, handoversPerMinute)
	fmt.Println("| backend | RedisLocks | Ready after start | RSS | peak RSS | Go heap | API/min idle | API/min handovers | lag p50 | lag p99 | lag max |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			b := startBenchBackend(t, backend)
			for _, n := range counts {
				t.Run(strconv.Itoa(n), func(t *testing.T) {
					r := benchScale(t, b, n, window)
					out.Runs = append(out.Runs, r)
					fmt.Printf("| %s | %d | %.1f s | %s | %s | %s | %.0f | %.0f | %v | %v | %v |\n", r.Backend, n, r.ReadySeconds,
						mebibytes(r.RSSBytes), mebibytes(r.PeakRSSBytes), mebibytes(r.HeapInuseBytes), r.IdleAPIPerMinute, r.HandoverAPIPerMinute,
						pctSeconds(r.LagSeconds, 0.5), pctSeconds(r.LagSeconds, 0.99), pctSeconds(r.LagSeconds, 1))
				})
			}
		})
	}
	if path := os.Getenv("CONTROLLER_BENCH_JSON"); path != "" {
		writeJSON(t, path, out)
	}
}

// benchBackend is the Redis of a run: how RedisLocks reach it, and a lock
// client of the benchmark's own for identity.
type benchBackend struct {
	name  string
	spec  v1alpha1.RedisConnectionSpec
	nodes func() redis.UniversalClient
	wait  int // the lock client's WaitReplicas, as the controller's candidates would
}

// startBenchBackend starts the backend called name, with benchPassword.
func startBenchBackend(t *testing.T, name string) benchBackend {
	t.Helper()
	auth := &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}
	switch name {
	case "single":
		s := redistest.Start(t, redisproc.Options{Password: benchPassword})
		return benchBackend{name: name, spec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}, PasswordSecretRef: auth},
			nodes: func() redis.UniversalClient {
				return redis.NewClient(&redis.Options{Addr: s.Addr, Password: benchPassword})
			}}
	case "cluster":
		c := redistest.StartReplicatedCluster(t, 3, 1)
		ctx := context.Background()
		for _, s := range c.Servers {
			rc := s.Client()
			// The replicas authenticate to their masters once these ask.
			for _, kv := range [][2]string{{"masterauth", benchPassword}, {"requirepass", benchPassword}} {
				if err := rc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
					t.Fatalf("CONFIG SET %s on %s: %v", kv[0], s.Addr, err)
				}
			}
			_ = rc.Close()
		}
		return benchBackend{name: name, wait: redislock.WaitAllReplicas,
			spec: v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeCluster, Addrs: c.Addrs, PasswordSecretRef: auth},
			nodes: func() redis.UniversalClient {
				return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, Password: benchPassword})
			}}
	}
	t.Fatalf("CONTROLLER_BENCH_BACKENDS names %q; want single or cluster", name)
	return benchBackend{}
}

// benchScale measures one controller with n RedisLocks on b.
func benchScale(t *testing.T, b benchBackend, n int, window time.Duration) benchresult.ControllerRun {
	cfg := benchConfig(t)
	c, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("%s-%d", b.name, n)
	w := watchBenchLocks(t, cfg, run)
	locks := benchLocks(t, c, n, b.spec, run)
	createAll(t, c, locks)

	metricsAddr, pprofAddr := freeAddr(t), freeAddr(t)
	cpuBefore, requestsBefore := controlPlaneCPU(t), readAPIRequests(t, controllerResources)
	start := time.Now()
	ctrl := startController(t, nil, "-metrics-bind-address="+metricsAddr, "-pprof-bind-address="+pprofAddr, "-resync="+benchResync.String())
	// Registered after the controller's own cleanup, so it runs first:
	// the controller removes the finalizers of the deleted locks.
	t.Cleanup(func() { deleteBenchLocks(t, c, w, locks) })
	waitUntil(t, 10*time.Minute, fmt.Sprintf("all %d RedisLocks Ready", n), func() bool { return w.readyCount() == n })
	ready := time.Since(start)
	cpu, readyWrites := controlPlaneCPU(t), readAPIRequests(t, controllerResources).sub(requestsBefore).writes()
	ctrlCPU, err := metricValue(metricsAddr, "process_cpu_seconds_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d RedisLocks Ready %v after the controller's start, with %.0f API writes; CPU meanwhile: kube-apiserver %.1fs, etcd %.1fs; the controller's counters then (its CPU among them):\n%s",
		n, ready.Round(time.Millisecond), readyWrites, cpu["kube-apiserver"]-cpuBefore["kube-apiserver"], cpu["etcd"]-cpuBefore["etcd"], controllerCounters(t, metricsAddr))

	cluster := clusterIDOf(t, apiServer(t))
	samples := pickSamples(locks, int(float64(handoversPerMinute)*window.Minutes()))
	holder := benchLockClient(t, b, benchHolder)
	held := make([]*redislock.Lock, len(samples))
	for i, rl := range samples {
		w.await(client.ObjectKeyFromObject(rl), benchHolder)
		// Held well past the end of the run, so that no expiry changes
		// the holder meanwhile.
		if held[i], err = holder.Obtain(context.Background(), redisconn.LockName(rl, cluster), 10*time.Minute); err != nil {
			t.Fatalf("obtain %s: %v", rl.Name, err)
		}
	}
	waitUntil(t, 2*time.Minute, fmt.Sprintf("%s as the holder of %d RedisLocks", benchHolder, len(samples)), func() bool {
		return w.shownCount(benchHolder) == len(samples)
	})

	before := readAPIRequests(t, controllerResources)
	pause(window)
	idle := readAPIRequests(t, controllerResources).sub(before)
	t.Logf("idle for %v: %v", window, idle)

	before = readAPIRequests(t, controllerResources)
	handoverStart := time.Now()
	lags := timeHandovers(t, w, benchLockClient(t, b, lagProbe), lagProbe, held, samples, cluster, time.Minute/handoversPerMinute)
	handoverTook := time.Since(handoverStart)
	loaded := readAPIRequests(t, controllerResources).sub(before)
	t.Logf("%d handovers in %v: %v", len(lags), handoverTook.Round(time.Millisecond), loaded)

	mem := readMemory(t, ctrl, metricsAddr)
	if dir := os.Getenv("CONTROLLER_BENCH_HEAP_DIR"); dir != "" {
		profile := heapProfile(t, pprofAddr)
		if err := os.WriteFile(filepath.Join(dir, "heap-"+run+".pb.gz"), profile, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return benchresult.ControllerRun{Backend: b.name, Locks: n, ReadySeconds: ready.Seconds(),
		ReadyAPIWrites:            readyWrites,
		ReadyAPIServerCPUSeconds:  cpu["kube-apiserver"] - cpuBefore["kube-apiserver"],
		ReadyEtcdCPUSeconds:       cpu["etcd"] - cpuBefore["etcd"],
		ReadyControllerCPUSeconds: ctrlCPU,
		RSSBytes:                  mem.rss, PeakRSSBytes: mem.peak, HeapInuseBytes: mem.heap,
		IdleAPIPerMinute:     (idle.reads() + idle.writes()) / window.Minutes(),
		HandoverAPIPerMinute: (loaded.reads() + loaded.writes()) / handoverTook.Minutes(),
		LagSeconds:           secondsOf(lags)}
}

// benchLockClient is a lock client on b with identity id, as a candidate
// of the benchmark's RedisLocks would have.
func benchLockClient(t *testing.T, b benchBackend, id string) *redislock.Client {
	t.Helper()
	rc := b.nodes()
	t.Cleanup(func() { _ = rc.Close() })
	lc, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: id, WaitReplicas: b.wait})
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// pickSamples returns k of locks, evenly spread.
func pickSamples(locks []*v1alpha1.RedisLock, k int) []*v1alpha1.RedisLock {
	k = min(k, len(locks))
	out := make([]*v1alpha1.RedisLock, k)
	for i := range out {
		out[i] = locks[i*len(locks)/k]
	}
	return out
}

// timeHandovers hands each of held (the locks of samples) over to probe,
// whose identity is probeID, one every every: held's Release, then probe's
// Obtain. It returns for each, in that order, the time from the start of
// the release until w saw probeID as the holder.
func timeHandovers(t *testing.T, w *lockWatch, probe *redislock.Client, probeID string, held []*redislock.Lock, samples []*v1alpha1.RedisLock, cluster string, every time.Duration) []time.Duration {
	t.Helper()
	started := make([]time.Time, len(held))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i, l := range held {
		nn := client.ObjectKeyFromObject(samples[i])
		w.await(nn, probeID)
		started[i] = time.Now()
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("release %s: %v", nn, err)
		}
		if _, err := probe.Obtain(context.Background(), redisconn.LockName(samples[i], cluster), 10*time.Minute); err != nil {
			t.Fatalf("obtain %s: %v", nn, err)
		}
		<-tick.C
	}
	waitUntil(t, time.Minute, fmt.Sprintf("%s as the holder of %d RedisLocks in a watch", probeID, len(held)), func() bool {
		return w.shownCount(probeID) == len(held)
	})
	lags := make([]time.Duration, len(held))
	for i, rl := range samples {
		lags[i] = w.shownAt(client.ObjectKeyFromObject(rl), probeID).Sub(started[i])
	}
	return lags
}

// deleteBenchLocks deletes locks and waits until w has seen them all go,
// so that they load no later controller.
func deleteBenchLocks(t *testing.T, c client.Client, w *lockWatch, locks []*v1alpha1.RedisLock) {
	t.Helper()
	namespaces := map[string]bool{}
	for _, rl := range locks {
		namespaces[rl.Namespace] = true
	}
	for ns := range namespaces {
		if err := c.DeleteAllOf(context.Background(), &v1alpha1.RedisLock{}, client.InNamespace(ns)); err != nil {
			t.Errorf("delete the RedisLocks in %s: %v", ns, err)
		}
	}
	waitUntil(t, 10*time.Minute, fmt.Sprintf("all %d RedisLocks gone", len(locks)), func() bool { return w.left(locks) == 0 })
}

// pctSeconds is pct of seconds.
func pctSeconds(seconds []float64, p float64) time.Duration {
	ds := make([]time.Duration, len(seconds))
	for i, s := range seconds {
		ds[i] = time.Duration(s * float64(time.Second))
	}
	return pct(ds, p)
}

// benchConfig is the admin's rest.Config without client-side throttling,
// so the benchmark's own requests do not queue behind it.
func benchConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	return cfg
}

// benchLocks makes benchNamespaces namespaces, each with the Secret of
// benchPassword, and returns n RedisLocks on spec spread over them,
// labelled benchLabel=run, not yet created.
func benchLocks(t *testing.T, c client.Client, n int, spec v1alpha1.RedisConnectionSpec, run string) []*v1alpha1.RedisLock {
	t.Helper()
	ctx := context.Background()
	namespaces := make([]string, benchNamespaces)
	for i := range namespaces {
		namespaces[i] = newNamespace(t)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i], Name: "redis-auth"},
			StringData: map[string]string{"password": benchPassword},
		}
		if err := c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	locks := make([]*v1alpha1.RedisLock, n)
	for i := range locks {
		locks[i] = &v1alpha1.RedisLock{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespaces[i%benchNamespaces], Name: fmt.Sprintf("lock-%05d", i),
				Labels: map[string]string{benchLabel: run},
			},
			Spec: v1alpha1.RedisLockSpec{Redis: spec.DeepCopy()},
		}
	}
	return locks
}

// createAll creates locks from a few goroutines at once, as a bulk apply
// would.
func createAll(t *testing.T, c client.Client, locks []*v1alpha1.RedisLock) {
	t.Helper()
	work := make(chan *v1alpha1.RedisLock)
	errs := make(chan error, len(locks))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for rl := range work {
				if err := c.Create(context.Background(), rl); err != nil {
					errs <- fmt.Errorf("create RedisLock %s/%s: %w", rl.Namespace, rl.Name, err)
				}
			}
		})
	}
	for _, rl := range locks {
		work <- rl
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// lockWatch follows the benchmark's RedisLocks through a watch: which
// exist and are Ready, and when an awaited holder first showed on each.
type lockWatch struct {
	mu      sync.Mutex
	ready   map[types.NamespacedName]bool
	awaited map[types.NamespacedName]string               // the holder to time
	shown   map[string]map[types.NamespacedName]time.Time // by holder: when it showed
}

// watchBenchLocks starts an informer on the RedisLocks labelled
// benchLabel=run, stopped when t ends.
func watchBenchLocks(t *testing.T, cfg *rest.Config, run string) *lockWatch {
	t.Helper()
	// The cache logs through controller-runtime's global logger, which
	// nothing else in this process sets; it has nothing to tell here.
	logf.SetLogger(logr.Discard())
	sel := labels.SelectorFromSet(labels.Set{benchLabel: run})
	scheme, err := testenv.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{&v1alpha1.RedisLock{}: {Label: sel}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := ca.GetInformer(ctx, &v1alpha1.RedisLock{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &lockWatch{ready: map[types.NamespacedName]bool{}, awaited: map[types.NamespacedName]string{}, shown: map[string]map[types.NamespacedName]time.Time{}}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(obj any) { w.forget(obj) },
	}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ca.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch on RedisLocks: %v", err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !ca.WaitForCacheSync(syncCtx) {
		t.Fatal("the watch on RedisLocks did not sync within 30s")
	}
	return w
}

// observe records obj's readiness and, the first time, when the awaited
// holder shows on it. It runs on the informer's goroutine.
func (w *lockWatch) observe(obj any) {
	now := time.Now()
	rl, ok := obj.(*v1alpha1.RedisLock)
	if !ok {
		return
	}
	nn := client.ObjectKeyFromObject(rl)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready[nn] = meta.IsStatusConditionTrue(rl.Status.Conditions, v1alpha1.ConditionReady)
	id := w.awaited[nn]
	if id == "" || rl.Status.HolderIdentity != id {
		return
	}
	if w.shown[id] == nil {
		w.shown[id] = map[types.NamespacedName]time.Time{}
	}
	if _, seen := w.shown[id][nn]; !seen {
		w.shown[id][nn] = now
	}
}

// forget drops a deleted lock.
func (w *lockWatch) forget(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	rl, ok := obj.(*v1alpha1.RedisLock)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ready, client.ObjectKeyFromObject(rl))
}

// count is how many of the locks exist.
// left is how many of locks w still sees: other locks of the run (a
// test's cleanups delete them later) do not count.
func (w *lockWatch) left(locks []*v1alpha1.RedisLock) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, rl := range locks {
		if _, ok := w.ready[client.ObjectKeyFromObject(rl)]; ok {
			n++
		}
	}
	return n
}

func (w *lockWatch) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.ready {
		if r {
			n++
		}
	}
	return n
}

// shownCount is on how many locks id showed since it was awaited there.
func (w *lockWatch) shownCount(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.shown[id])
}

// await marks nn as about to be acquired by id.
func (w *lockWatch) await(nn types.NamespacedName, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.awaited[nn] = id
}

// shownAt returns when id showed on nn.
func (w *lockWatch) shownAt(nn types.NamespacedName, id string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shown[id][nn]
}

// memory is a reading of the controller's memory, in bytes.
type memory struct {
	rss, peak, heap int64
}

// readMemory reads VmRSS and VmHWM of the controller process from /proc
// and go_memstats_heap_inuse_bytes from its /metrics at addr.
func readMemory(t *testing.T, ctrl *proc.Process, addr string) memory {
	t.Helper()
	status := fmt.Sprintf("/proc/%d/status", ctrl.Pid())
	f, err := os.Open(status)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "VmRSS:	   81234 kB"
		key, val, _ := strings.Cut(sc.Text(), ":")
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &m.rss
		case "VmHWM":
			dst = &m.peak
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", status, sc.Text(), err)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if m.rss == 0 || m.peak == 0 {
		t.Fatalf("%s has no VmRSS or VmHWM", status)
	}
	heap, err := metricValue(addr, "go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Fatal(err)
	}
	m.heap = int64(heap)
	return m
}

// getOK fetches path from the controller's server at addr and returns the
// body of a 200 answer.
func getOK(addr, path string) ([]byte, error) {
	hc := http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s from %s: %s", path, addr, resp.Status)
	}
	return body, nil
}

// heapProfile fetches the heap profile (gzipped protobuf, as go tool pprof
// reads it) from a controller's -pprof-bind-address.
func heapProfile(t *testing.T, addr string) []byte {
	t.Helper()
	body, err := getOK(addr, "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Fatalf("GET /debug/pprof/heap from the controller: %d bytes starting %q; want a gzipped profile", len(body), body[:min(len(body), 16)])
	}
	return body
}

// metricValue reads the unlabelled metric from the /metrics at addr.
func metricValue(addr, metric string) (float64, error) {
	body, err := getOK(addr, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, metric+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", metric, v, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("/metrics at %s has no %s", addr, metric)
}

// controlPlaneCPU returns the CPU seconds (user and system) used so far
// by the processes called kube-apiserver and etcd, by name, from /proc.
func controlPlaneCPU(t *testing.T) map[string]float64 {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cpu := map[string]float64{}
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // not a process, or gone
		}
		// "pid (comm) state ppid ... utime stime ...": fields 14 and 15.
		open, closing := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || closing < open {
			continue
		}
		name, rest := string(stat[open+1:closing]), strings.Fields(string(stat[closing+1:]))
		if (name != "kube-apiserver" && name != "etcd") || len(rest) < 13 {
			continue
		}
		utime, _ := strconv.ParseFloat(rest[11], 64)
		stime, _ := strconv.ParseFloat(rest[12], 64)
		cpu[name] += (utime + stime) / 100 // USER_HZ
	}
	return cpu
}

// controllerCounters returns the lines of the controller's /metrics at
// addr that tell where a reconcile's time went: reconciles by result,
// errors, requeues, and its API requests by code.
func controllerCounters(t *testing.T, addr string) string {
	t.Helper()
	body, err := getOK(addr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		for _, m := range []string{"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "workqueue_retries_total", "rest_client_requests_total", "process_cpu_seconds_total"} {
			if strings.HasPrefix(line, m) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// mebibytes formats a byte count.
func mebibytes(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
