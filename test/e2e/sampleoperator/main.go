// Command sampleoperator is a small controller-runtime operator laid out as
// a stock kubebuilder main.go, with one change block that swaps the Lease
// leader election for a RedisLock (pkg/election). The e2e failover tests
// and the failover benchmark run several replicas of it on one host.
//
// On stdout it prints only these lines, each flushed at once:
//
//	STARTED <identity>                        the manager started, before leader election
//	LEADING <identity> <unix-nanos>           this replica became the leader
//	RECONCILING <identity> <seq> <unix-nanos> a probe's reconcile read seq and will write it
//	RECONCILED <identity> <seq> <unix-nanos>  its write succeeded (nanos: when it was sent)
//	REFUSED <identity> <seq> <unix-nanos>     the write gate refused it (nanos: when it was tried)
//
// With -http-address it serves GET /leader as the agent does (200 while
// election.Lock.Leading, else 503; the agent's JSON, internal/leaderhttp), for the chaos
// checker. Logs go to stderr. -election=lease runs controller-runtime's own Lease
// election with the same durations, as the baseline.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/redislock/redislock/internal/leaderhttp" // for the chaos checker only
	"github.com/redislock/redislock/pkg/election"
	"github.com/redislock/redislock/pkg/mgrelection" // (diff)
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
}

// ConfigMapReconciler is the operator's trivial reconciler: it logs, and
// for a probe ConfigMap (label ProbeLabel) it writes: the annotation
// WrittenPrefix+identity set to the ConfigMap's data["seq"], once per
// seq, so that the tests can tell when a replica's write reached the API
// server, and whose.
type ConfigMapReconciler struct {
	client.Client
	Identity string
	// Hold, if set, holds one probe write between its read and its write
	// until the process is resumed from a stop (see probeHold).
	Hold *probeHold
}

// The probe's label and annotation prefix.
const (
	ProbeLabel    = "e2e.redislock.io/probe"
	WrittenPrefix = "e2e.redislock.io/written-by-"
)

// Reconcile logs the ConfigMap it is called for, and writes a probe.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("reconciled", "keys", len(cm.Data))
	seq, key := cm.Data["seq"], WrittenPrefix+r.Identity
	if cm.Labels[ProbeLabel] == "" || cm.Annotations[key] == seq {
		return ctrl.Result{}, nil
	}
	held := r.Hold.take(seq) // before RECONCILING, which the test acts on
	say("RECONCILING %s %s %d", r.Identity, seq, time.Now().UnixNano())
	if held {
		defer r.Hold.done()
		// A write decided before a pause goes out after it whatever the
		// manager does meanwhile, as one already on the wire would: the
		// worst case, which only the write gate stops. Hence a context
		// that the manager's stop does not cancel (a deposed leader that
		// noticed its loss first would cancel its own write), and main
		// waiting for this write before it exits.
		r.Hold.wait()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), heldWriteTimeout)
		defer cancel()
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[key] = seq
	sent := time.Now().UnixNano()
	if err := r.Patch(ctx, &cm, patch); err != nil {
		if election.IsNotLeading(err) {
			say("REFUSED %s %s %d", r.Identity, seq, sent)
		}
		return ctrl.Result{}, err
	}
	say("RECONCILED %s %s %d", r.Identity, seq, sent)
	return ctrl.Result{}, nil
}

// Bounds of a held probe write: how long it waits at most for the process
// to be resumed (a safety net: the test resumes it), and how long the
// write may take once sent.
const (
	holdLimit        = 2 * time.Minute
	heldWriteTimeout = 30 * time.Second
)

// probeHold holds the first reconcile that writes probe seq between its
// read and its write until the process receives SIGCONT, that is until a
// test that stopped it (SIGSTOP) mid-reconcile resumes it: the order of
// the pause and the write is the test's, not a timer's. main waits for
// the held write before it exits, so that the write is sent even when
// the manager stops first: on lost leadership controller-runtime skips
// the graceful shutdown (it does not wait for running reconciles) and
// main exits at once, which would otherwise race the write.
type probeHold struct {
	seq     string
	resumed chan struct{} // closed at the first SIGCONT after taken

	mu      sync.Mutex
	taken   bool // the held reconcile has begun
	woken   bool // resumed is closed
	exiting bool // main waits for the held write: no new one
	writes  sync.WaitGroup
}

// newProbeHold holds the write of probe seq until SIGCONT.
func newProbeHold(seq string) *probeHold {
	h := &probeHold{seq: seq, resumed: make(chan struct{})}
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	go func() {
		for range cont {
			h.mu.Lock()
			if h.taken && !h.woken { // a SIGCONT before the hold began resumes nothing
				h.woken = true
				close(h.resumed)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// take reports whether the reconcile writing seq is the held one: the
// first for h's seq. Its caller must call done when its write is over.
func (h *probeHold) take(seq string) bool {
	if h == nil || seq != h.seq {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken || h.exiting {
		return false
	}
	h.taken = true
	h.writes.Add(1)
	return true
}

// wait blocks until the process has been resumed, or holdLimit.
func (h *probeHold) wait() {
	select {
	case <-h.resumed:
	case <-time.After(holdLimit):
		setupLog.Info("held probe write: no SIGCONT came; writing anyway", "limit", holdLimit, "seq", h.seq)
	}
}

func (h *probeHold) done() { h.writes.Done() }

// drain waits for the held write, if one began.
func (h *probeHold) drain() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.exiting = true
	h.mu.Unlock()
	h.writes.Wait()
}

// SetupWithManager registers the reconciler.
func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("configmap").Complete(r)
}

// stdout lines are whole and written in one call each.
var stdoutMu sync.Mutex

func say(format string, args ...any) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	_, _ = fmt.Fprintf(os.Stdout, format+"\n", args...)
	_ = os.Stdout.Sync()
}

// nonLeader is a Runnable that runs on every replica, leader or not.
type nonLeader func(context.Context) error

func (f nonLeader) Start(ctx context.Context) error { return f(ctx) }
func (nonLeader) NeedLeaderElection() bool          { return false }

func main() {
	var (
		electionKind   string
		redisLockRef   string
		leaseNamespace string
		leaseID        string
		leaseDuration  time.Duration
		renewDeadline  time.Duration
		retryPeriod    time.Duration
		identity       string
		httpAddr       string
		writeGate      bool
		holdProbe      string
	)
	hostname, _ := os.Hostname()
	flag.StringVar(&electionKind, "election", "redis", "leader election: redis (a RedisLock) or lease (controller-runtime's Lease)")
	// (diff) -redislock and -identity; -election and the -lease-* flags are
	// this sample's baseline switch.
	flag.StringVar(&redisLockRef, "redislock", "", "the RedisLock to elect on, namespace/name (for -election=redis)")
	flag.StringVar(&leaseNamespace, "lease-namespace", "", "the Lease's namespace (for -election=lease)")
	flag.StringVar(&leaseID, "lease-id", "sampleoperator", "the Lease's name (for -election=lease)")
	flag.DurationVar(&leaseDuration, "lease-duration", 15*time.Second, "LeaseDuration (for -election=lease; a RedisLock's ttl sets it for redis)")
	flag.DurationVar(&renewDeadline, "renew-deadline", 10*time.Second, "RenewDeadline (for -election=lease)")
	flag.DurationVar(&retryPeriod, "retry-period", 2*time.Second, "RetryPeriod (for -election=lease)")
	flag.StringVar(&identity, "identity", fmt.Sprintf("%s_%d", hostname, os.Getpid()), "this replica's identity in the election")
	flag.StringVar(&httpAddr, "http-address", "", "serve GET /leader here (for -election=redis)")
	flag.BoolVar(&writeGate, "write-gate", false, "refuse the manager's writes while the lock is not held (for -election=redis)")
	flag.StringVar(&holdProbe, "hold-probe", "", "hold the first write of this probe seq, after its read, until the process is resumed from a stop (SIGCONT); exit only after it")
	opts := zap.Options{Development: true, DestWriter: os.Stderr}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	ctx := ctrl.SetupSignalHandler() // (diff) stock: mgr.Start(ctrl.SetupSignalHandler())
	cfg := ctrl.GetConfigOrDie()     // (diff) stock: ctrl.NewManager(ctrl.GetConfigOrDie(), ...)
	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}

	// ---- BEGIN: what differs from a stock kubebuilder main.go ----------
	// Stock kubebuilder sets LeaderElection: enableLeaderElection and
	// LeaderElectionID: "<id>.example.com" in ctrl.Options above. For a
	// Redis lock, drop those two and let the RedisLock fill in the election
	// options instead; that is the whole change (the "lease" case is only
	// this sample's baseline, the stock Lease election with the same
	// durations). Elsewhere the diff is small and marked "(diff)": the
	// pkg/mgrelection import, the -redislock and -identity flags, and ctx
	// and cfg taken before NewManager (stock code inlines them in
	// NewManager and mgr.Start) because ForRedisLock needs them; the
	// write gate (-write-gate here) is one more, optional, line.
	closeElection := func() {}
	switch electionKind {
	case "redis":
		ns, name, ok := strings.Cut(redisLockRef, "/")
		if !ok || ns == "" || name == "" {
			setupLog.Error(nil, "-redislock must be namespace/name", "redislock", redisLockRef)
			os.Exit(2)
		}
		e, err := mgrelection.ForRedisLock(ctx, cfg, types.NamespacedName{Namespace: ns, Name: name}, identity)
		if err != nil {
			setupLog.Error(err, "unable to set up Redis leader election")
			os.Exit(1)
		}
		closeElection = e.Close // after mgr.Start returns
		e.Apply(&mgrOpts)
		if writeGate {
			cfg = e.Lock.Gate(cfg) // (diff, optional) writes pass only while leading
		}
		if httpAddr != "" {
			go serveLeader(httpAddr, identity, ns+"/"+name, e.Lock)
		}
	case "lease":
		// controller-runtime's own Lease election; its Lease holder is
		// hostname_<uuid>, not -identity (only the LEADING line uses that).
		mgrOpts.LeaderElection = true
		mgrOpts.LeaderElectionNamespace = leaseNamespace
		mgrOpts.LeaderElectionID = leaseID
		mgrOpts.LeaseDuration = &leaseDuration
		mgrOpts.RenewDeadline = &renewDeadline
		mgrOpts.RetryPeriod = &retryPeriod
		mgrOpts.LeaderElectionReleaseOnCancel = true
	default:
		setupLog.Error(nil, "-election must be redis or lease", "election", electionKind)
		os.Exit(2)
	}
	// ---- END: what differs from a stock kubebuilder main.go ------------

	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		setupLog.Error(err, "unable to start manager")
		os.Exit(1)
	}
	var hold *probeHold
	if holdProbe != "" {
		hold = newProbeHold(holdProbe)
	}
	if err := (&ConfigMapReconciler{Client: mgr.GetClient(), Identity: identity, Hold: hold}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "unable to create controller", "controller", "ConfigMap")
		os.Exit(1)
	}

	// Sample-only instrumentation for the tests.
	if err := mgr.Add(nonLeader(func(ctx context.Context) error {
		say("STARTED %s", identity)
		<-ctx.Done()
		return nil
	})); err != nil {
		setupLog.Error(err, "unable to add the STARTED runnable")
		os.Exit(1)
	}
	// A leader-only Runnable: RunnableFunc needs leader election.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		say("LEADING %s %d", identity, time.Now().UnixNano())
		<-ctx.Done()
		return nil
	})); err != nil {
		setupLog.Error(err, "unable to add the leader runnable")
		os.Exit(1)
	}

	setupLog.Info("starting manager", "election", electionKind, "identity", identity)
	err = mgr.Start(ctx)
	hold.drain() // a held write goes out even after a lost election
	closeElection()
	if err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// serveLeader answers GET /leader from lock.Leading: the sample's view of
// its own leadership, in the agent's JSON.
func serveLeader(addr, identity, lockName string, lock *election.Lock) {
	mux := http.NewServeMux()
	mux.Handle("GET /leader", leaderhttp.Handler(func() leaderhttp.Status {
		fence, at, ok := lock.Leading()
		st := leaderhttp.Status{Leading: ok, Identity: identity, Lock: lockName, ObservedAt: at}
		if ok {
			st.Holder, st.FencingToken = identity, fence
		}
		return st
	}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		setupLog.Error(err, "serve /leader")
		os.Exit(1)
	}
}
