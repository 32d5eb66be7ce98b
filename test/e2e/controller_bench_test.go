package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
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
	// lagSamples locks, one every lagEvery, are acquired to time the lag.
	lagSamples = 300
	lagEvery   = 50 * time.Millisecond
	// lagProbe is the identity that acquires them.
	lagProbe = "lag-probe"
	// benchLabel marks the benchmark's RedisLocks for its watch.
	benchLabel = "redislock.io/bench"
	// benchResync is the controller's -resync, its default.
	benchResync = 30 * time.Second
)

// TestControllerBenchmark runs the `redislock controller` binary (with its
// default -resync, 30s) with CONTROLLER_BENCH_LOCKS RedisLocks in benchNamespaces
// namespaces, all on one redis-server, and measures what it costs and how
// far its status trails Redis:
//   - how long from the first create until every lock is Ready;
//   - the controller's memory before the locks and after the lag samples:
//     VmRSS and VmHWM (peak) from /proc, and the Go heap in use from its
//     /metrics;
//   - the status lag: for lagSamples of the locks, one every lagEvery, the
//     time from the start of a redislock Obtain to a watch on RedisLocks
//     showing the new .status.holderIdentity.
//
// It prints a markdown table; `make bench` runs it.
//
//	CONTROLLER_BENCH_LOCKS how many RedisLocks (required; 1000 in make bench)
//	CONTROLLER_BENCH_JSON  a file to write the results to, for
//	                       test/bench/cmd/benchreport (optional)
func TestControllerBenchmark(t *testing.T) {
	locksEnv := os.Getenv("CONTROLLER_BENCH_LOCKS")
	if locksEnv == "" {
		t.Skip("CONTROLLER_BENCH_LOCKS is unset: the controller benchmark creates that many RedisLocks and takes minutes; run `make bench` or set CONTROLLER_BENCH_LOCKS=N")
	}
	n, err := strconv.Atoi(locksEnv)
	if err != nil || n < 1 {
		t.Fatalf("CONTROLLER_BENCH_LOCKS=%q: want a positive number", locksEnv)
	}
	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})
	metricsAddr := freeAddr(t)
	ctrl := startController(t, nil, "-metrics-bind-address="+metricsAddr, "-resync="+benchResync.String())
	waitUntil(t, 30*time.Second, "the controller's /metrics", func() bool {
		_, err := heapInuse(metricsAddr)
		return err == nil
	})
	idle := readMemory(t, ctrl, metricsAddr)

	cfg := benchConfig(t)
	c, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := watchBenchLocks(t, cfg)
	locks := benchLocks(t, c, n, s.Addr)

	start := time.Now()
	createAll(t, c, locks)
	waitUntil(t, 10*time.Minute, fmt.Sprintf("all %d RedisLocks Ready", n), func() bool { return w.readyCount() == n })
	allReady := time.Since(start)
	t.Logf("%d RedisLocks created and Ready after %v", n, allReady.Round(time.Millisecond))

	lags := timeLag(t, w, s, locks)
	loaded := readMemory(t, ctrl, metricsAddr)

	res := controllerJSON{
		Locks: n, Namespaces: benchNamespaces, Resync: benchResync.String(), AllReadySeconds: allReady.Seconds(),
		IdleRSSBytes: idle.rss, IdleHeapInuseBytes: idle.heap,
		RSSBytes: loaded.rss, PeakRSSBytes: loaded.peak, HeapInuseBytes: loaded.heap,
		AcquireEvery: lagEvery.String(), LagSeconds: secondsOf(lags),
	}
	fmt.Printf("\nThe controller with %d RedisLocks (-resync %v); lag over %d locks, one acquired every %v\n\n", n, benchResync, len(lags), lagEvery)
	fmt.Println("| RedisLocks | all Ready after | RSS idle | RSS | peak RSS | Go heap idle | Go heap | lag p50 | lag p99 | lag max |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %d | %v | %s | %s | %s | %s | %s | %v | %v | %v |\n", n, allReady.Round(time.Millisecond),
		mebibytes(idle.rss), mebibytes(loaded.rss), mebibytes(loaded.peak), mebibytes(idle.heap), mebibytes(loaded.heap),
		pct(lags, 0.5), pct(lags, 0.99), pct(lags, 1))
	if path := os.Getenv("CONTROLLER_BENCH_JSON"); path != "" {
		writeJSON(t, path, res)
	}
}

// controllerJSON is what CONTROLLER_BENCH_JSON receives, times in seconds;
// the field names are the contract with test/bench/cmd/benchreport.
type controllerJSON struct {
	Locks              int       `json:"locks"`
	Namespaces         int       `json:"namespaces"`
	Resync             string    `json:"resync"`
	AllReadySeconds    float64   `json:"allReadySeconds"`
	IdleRSSBytes       int64     `json:"idleRssBytes"`
	IdleHeapInuseBytes int64     `json:"idleHeapInuseBytes"`
	RSSBytes           int64     `json:"rssBytes"`
	PeakRSSBytes       int64     `json:"peakRssBytes"`
	HeapInuseBytes     int64     `json:"heapInuseBytes"`
	AcquireEvery       string    `json:"acquireEvery"`
	LagSeconds         []float64 `json:"lagSeconds"`
}

// benchConfig is the admin's rest.Config without client-side throttling,
// so the benchmark's own requests do not queue behind it.
func benchConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	return cfg
}

// benchLocks makes benchNamespaces namespaces, each with the Secret of
// the redis-server at addr, and returns n RedisLocks spread over them,
// not yet created. They are deleted when t ends, so that they do not load
// the controllers of the tests that follow.
func benchLocks(t *testing.T, c client.Client, n int, addr string) []*v1alpha1.RedisLock {
	t.Helper()
	ctx := context.Background()
	namespaces := make([]string, benchNamespaces)
	for i := range namespaces {
		namespaces[i] = newNamespace(t)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i], Name: "redis-auth"},
			StringData: map[string]string{"password": "s3cret"},
		}
		if err := c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ns := range namespaces {
			if err := c.DeleteAllOf(ctx, &v1alpha1.RedisLock{}, client.InNamespace(ns)); err != nil {
				t.Errorf("delete the RedisLocks in %s: %v", ns, err)
			}
		}
	})
	locks := make([]*v1alpha1.RedisLock, n)
	for i := range locks {
		locks[i] = &v1alpha1.RedisLock{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespaces[i%benchNamespaces], Name: fmt.Sprintf("lock-%05d", i),
				Labels: map[string]string{benchLabel: "controller"},
			},
			Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{
				Addrs:             []string{addr},
				PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"},
			}},
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

// lockWatch follows the benchmark's RedisLocks through a watch: which are
// Ready, and when an awaited holder first showed on each.
type lockWatch struct {
	mu      sync.Mutex
	ready   map[types.NamespacedName]bool
	awaited map[types.NamespacedName]bool      // lagProbe is to hold it
	shown   map[types.NamespacedName]time.Time // when lagProbe showed
}

// watchBenchLocks starts an informer on the RedisLocks labelled
// benchLabel, stopped when t ends.
func watchBenchLocks(t *testing.T, cfg *rest.Config) *lockWatch {
	t.Helper()
	// The cache logs through controller-runtime's global logger, which
	// nothing else in this process sets; it has nothing to tell here.
	logf.SetLogger(logr.Discard())
	sel := labels.SelectorFromSet(labels.Set{benchLabel: "controller"})
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
	w := &lockWatch{ready: map[types.NamespacedName]bool{}, awaited: map[types.NamespacedName]bool{}, shown: map[types.NamespacedName]time.Time{}}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
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
	if _, seen := w.shown[nn]; w.awaited[nn] && !seen && rl.Status.HolderIdentity == lagProbe {
		w.shown[nn] = now
	}
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

func (w *lockWatch) shownCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.shown)
}

// await marks nn as about to be acquired by lagProbe.
func (w *lockWatch) await(nn types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.awaited[nn] = true
}

// shownAt returns when lagProbe showed on nn.
func (w *lockWatch) shownAt(nn types.NamespacedName) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shown[nn]
}

// timeLag acquires lagSamples of locks, evenly spread, one every
// lagEvery, with a lock client of its own on s, and returns for each, in
// that order, the time from the start of Obtain until w saw lagProbe as
// its holder.
func timeLag(t *testing.T, w *lockWatch, s *redisproc.Server, locks []*v1alpha1.RedisLock) []time.Duration {
	t.Helper()
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: lagProbe})
	if err != nil {
		t.Fatal(err)
	}
	cluster := clusterIDOf(t, testEnv.Config)
	samples := min(lagSamples, len(locks))
	keys := make([]types.NamespacedName, samples)
	started := make([]time.Time, samples)
	tick := time.NewTicker(lagEvery)
	defer tick.Stop()
	for i := range samples {
		rl := locks[i*len(locks)/samples]
		keys[i] = client.ObjectKeyFromObject(rl)
		w.await(keys[i])
		started[i] = time.Now()
		// Held well past the end of the test, so no expiry changes the
		// holder meanwhile.
		if _, err := lc.Obtain(context.Background(), redisconn.LockName(rl, cluster), 10*time.Minute); err != nil {
			t.Fatalf("obtain %s: %v", keys[i], err)
		}
		<-tick.C
	}
	waitUntil(t, time.Minute, fmt.Sprintf("%s as the holder of %d RedisLocks in a watch", lagProbe, samples), func() bool {
		return w.shownCount() == samples
	})
	lags := make([]time.Duration, samples)
	for i, nn := range keys {
		lags[i] = w.shownAt(nn).Sub(started[i])
	}
	return lags
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
	if m.heap, err = heapInuse(addr); err != nil {
		t.Fatal(err)
	}
	return m
}

// heapInuse reads go_memstats_heap_inuse_bytes from the /metrics at addr.
func heapInuse(addr string) (int64, error) {
	const metric = "go_memstats_heap_inuse_bytes"
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", metric, v, err)
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/metrics at %s has no %s", addr, metric)
}

// mebibytes formats a byte count.
func mebibytes(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
