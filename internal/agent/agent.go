package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/healthprobe"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/pkg/promlock"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// The agent runs as its pod's service account, which needs these in the
// pod's namespace (the redislock-agent ClusterRole, bound by a RoleBinding);
// get on the Secrets its lock names, by name (a Role with resourceNames:
// the role holds no Secret, so that a pod bound to it reads no Secret of
// its namespace it was not given); and for a lock on a
// ClusterRedisConnection, get on it (the redislock-clusterconnection-reader
// ClusterRole, bound by a ClusterRoleBinding).
// +kubebuilder:rbac:groups=redislock.io,resources=redislocks;redisconnections,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=patch

// LeaderLabel is the pod label the agent keeps "true" while its pod leads
// and "false" otherwise, when Options.LabelPod is set.
const LeaderLabel = "redislock.io/leader"

// Defaults of Options.MaxConnections and Options.MaxLongPolls: at about
// 21 KiB each, 512 connections held at once cost 11 MiB of the agent's
// 128Mi limit, and the long polls leave 384 of them to the others.
const (
	DefaultMaxConnections = 512
	DefaultMaxLongPolls   = 128
)

// DefaultHealthPeriod is how often the agent checks Options.Health unless
// Options.HealthPeriod says otherwise.
const DefaultHealthPeriod = time.Second

// Retry bounds for reading the RedisLock at start.
const (
	openBackoffMin = time.Second
	openBackoffMax = 30 * time.Second
)

// fencingReadFloor bounds how often a fenced agent reads its RedisLock
// while it waits for the status to name it, whatever renewInterval (down
// to 1ms) the lock's author chose: the API server is shared.
const fencingReadFloor = 500 * time.Millisecond

// finalWriteTimeout bounds the last label patch and file write at exit.
const finalWriteTimeout = 5 * time.Second

// ErrInvalidOptions is wrapped by New's errors for invalid Options.
var ErrInvalidOptions = errors.New("agent: invalid options")

// Options configures an Agent.
type Options struct {
	// Lock is the RedisLock to campaign for. Required.
	Lock types.NamespacedName
	// Identity is this candidate's identity, the pod's name. Required.
	Identity string
	// Addr is the listen address of /leader, /healthz and /metrics.
	// Default agentflags.DefaultHTTPAddress.
	Addr string
	// ProbeAddr, when set, is the listen address of a second server, of
	// /healthz and /metrics alone: for the kubelet's probes and for
	// Prometheus when Addr is a loopback address, so that /leader is
	// served to the pod's own containers only.
	ProbeAddr string
	// MaxConnections bounds the connections each server holds open at
	// once; more wait, not accepted, in the kernel's listen queue, until
	// one closes. Default DefaultMaxConnections.
	MaxConnections int
	// MaxLongPolls bounds the long polls of /leader held at once; one more
	// is answered at once (see leaderhttp.Changes.Handler). It must be
	// below MaxConnections, so that a probe finds a connection while the
	// long polls are at their cap. Default DefaultMaxLongPolls.
	MaxLongPolls int
	// LabelPod makes the agent keep LeaderLabel on the pod called
	// Identity in Lock's namespace.
	LabelPod bool
	// LeaderFile, when set, is the path of a file the agent keeps the
	// /leader answer in (leaderhttp.Status), as JSON.
	LeaderFile string
	// Command, when set, is run (under a guard process) only while this
	// agent leads, and stopped when leadership ends: SIGTERM, then SIGKILL
	// once half of ttl less renewDeadline has passed. Its exit gives the
	// lock up and ends Run with its exit code.
	Command []string
	// OnLost is what an agent running Command does when leadership ends:
	// OnLostExit (the default) or OnLostCampaign.
	OnLost string
	// Hook, when set, is the path of a program run on each change of
	// leadership or holder, with the /leader JSON on its stdin and
	// REDISLOCK_LEADING in its environment (see runHooks).
	Hook string
	// ClusterID is this cluster's identity, which names a lock of scope
	// Cluster in Redis (the webhook injects it). Default: read from the
	// API server, which needs get on namespace kube-system.
	ClusterID string
	// Health, when set, gates leadership on the app's health (a
	// healthprobe signal: http://HOST:PORT/PATH or file:/PATH, checked
	// every HealthPeriod (default DefaultHealthPeriod); or ready, the
	// pod's app containers' Ready, watched): the agent
	// campaigns only while the app is healthy, and steps down (releases)
	// once it has been unhealthy for StepDownAfter (default the lock's
	// ttl). /leader's error says why it does not campaign meanwhile.
	Health        string
	HealthPeriod  time.Duration
	StepDownAfter time.Duration
	// Fencing makes each term wait, holding the lock, until the
	// RedisLock's status names Identity as the holder (what the admission
	// policy redislock-fencing admits the pod's writes by) before the
	// agent leads: reports it, labels the pod, runs Command. Meanwhile
	// /leader's error says so (redislock.ErrNotAdmitted), and the agent
	// reads the RedisLock at once, then backing off from 10ms to the
	// lock's renewInterval, or fencingReadFloor if that is longer
	// (redisconn.AwaitHolder).
	Fencing bool
	// Clock tells time, for the agent and its lock client. Default
	// clock.RealClock.
	Clock clock.WithDelayedExecution
	// Logger receives the agent's and the lock engine's logs. Default
	// logr.Discard().
	Logger logr.Logger
}

// Agent campaigns for one RedisLock and reports who leads.
type Agent struct {
	o        Options
	c        client.Client
	reg      *prometheus.Registry
	metrics  *promlock.Metrics
	changes  leaderhttp.Changes // wakes the long polls of /leader
	leader   *leaderhttp.LongPolls
	timeouts timeouts // of the HTTP servers

	// probe and health, with Options.Health: the app's health, which
	// probeHealth (or watchPodReady) keeps and the elector is gated on;
	// pods, for watchPodReady, reads the pod.
	probe  healthprobe.Probe
	health *redislock.Health
	pods   rest.Interface

	// hooks counts the changes the hook has reported (sharded.go).
	hooks hookProgress

	mu      sync.Mutex
	elector *redislock.Elector // nil until campaigning
	sharded *redislock.Sharded // for a sharded lock, in elector's place
	shards  int                // the sharded lock's shard count
	name    string             // the lock's name in Redis, once read
	openErr error              // why it is not campaigning yet
}

// OptionError is an invalid Options field; it matches ErrInvalidOptions.
type OptionError struct {
	// Field is the Options field, as "Lock.Name".
	Field string
	// Reason says what is wrong with its value.
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidOptions, e.Field, e.Reason)
}

// Is makes an OptionError match ErrInvalidOptions.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOptions }

// validate returns an *OptionError for each invalid field of o, all of
// them (errors.Join), so that a command line is fixed in one go.
func (o Options) validate() error {
	var errs []error
	invalid := func(field, format string, args ...any) {
		errs = append(errs, &OptionError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if o.Lock.Name == "" {
		invalid("Lock.Name", "required: the name of the RedisLock to campaign for")
	} else if e := validation.IsDNS1123Subdomain(o.Lock.Name); len(e) > 0 {
		invalid("Lock.Name", "%q is not a RedisLock name: %s", o.Lock.Name, strings.Join(e, "; "))
	}
	if o.Lock.Namespace == "" {
		invalid("Lock.Namespace", "required: the namespace of the RedisLock and of this pod")
	} else if e := validation.IsDNS1123Label(o.Lock.Namespace); len(e) > 0 {
		invalid("Lock.Namespace", "%q is not a namespace: %s", o.Lock.Namespace, strings.Join(e, "; "))
	}
	if o.Identity == "" {
		invalid("Identity", "required: this candidate's identity, the pod's name")
	}
	switch {
	case o.OnLost != "" && !onLostValues.Has(o.OnLost):
		invalid("OnLost", "%q: want %s or %s", o.OnLost, OnLostExit, OnLostCampaign)
	case o.OnLost != "" && len(o.Command) == 0:
		invalid("OnLost", "set without a command to run (after --)")
	}
	if o.Health != "" {
		if _, err := healthprobe.Parse(o.Health); err != nil {
			invalid("Health", "%v", err)
		}
	}
	switch {
	case o.HealthPeriod < 0:
		invalid("HealthPeriod", "%v is negative", o.HealthPeriod)
	case o.HealthPeriod > 0 && o.Health == "":
		invalid("HealthPeriod", "set without a health signal")
	case o.HealthPeriod > 0 && o.Health == healthprobe.Ready:
		invalid("HealthPeriod", "set with the signal %s, which the agent watches rather than checks", healthprobe.Ready)
	}
	switch {
	case o.StepDownAfter < 0:
		invalid("StepDownAfter", "%v is negative", o.StepDownAfter)
	case o.StepDownAfter > 0 && o.Health == "":
		invalid("StepDownAfter", "set without a health signal")
	}
	switch {
	case o.MaxConnections < 0:
		invalid("MaxConnections", "%d: want at least 1, or 0 for the default %d", o.MaxConnections, DefaultMaxConnections)
	case o.MaxLongPolls < 0:
		invalid("MaxLongPolls", "%d: want at least 1, or 0 for the default %d", o.MaxLongPolls, DefaultMaxLongPolls)
	case cmp.Or(o.MaxLongPolls, DefaultMaxLongPolls) >= cmp.Or(o.MaxConnections, DefaultMaxConnections):
		invalid("MaxLongPolls", "%d: want fewer than the connection cap (%d), so that a probe finds one while the long polls are at their cap",
			cmp.Or(o.MaxLongPolls, DefaultMaxLongPolls), cmp.Or(o.MaxConnections, DefaultMaxConnections))
	}
	return errors.Join(errs...)
}

// New checks o (an *OptionError for each invalid field) and returns an Agent
// that talks to the API server through cfg. It does no I/O.
func New(cfg *rest.Config, o Options) (*Agent, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.OnLost == "" {
		o.OnLost = OnLostExit
	}
	o.Addr = cmp.Or(o.Addr, agentflags.DefaultHTTPAddress)
	o.MaxConnections = cmp.Or(o.MaxConnections, DefaultMaxConnections)
	o.MaxLongPolls = cmp.Or(o.MaxLongPolls, DefaultMaxLongPolls)
	o.HealthPeriod = cmp.Or(o.HealthPeriod, DefaultHealthPeriod)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	c, err := redisconn.NewAPIClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{o: o, c: c, reg: prometheus.NewRegistry(), timeouts: defaultTimeouts}
	if o.Health != "" {
		a.probe, _ = healthprobe.Parse(o.Health) // validate parsed it
		a.health = redislock.NewHealth(errNotProbed, o.Clock)
	}
	if a.probe.Pod() {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.pods = cs.CoreV1().RESTClient()
	}
	a.leader = a.changes.Handler(a.status, o.Clock, o.MaxLongPolls)
	if a.metrics, err = promlock.New(a.reg); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	labels := prometheus.Labels{"redislock": o.Lock.String()}
	a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "redislock_agent_leading",
		Help:        "1 while this agent's pod leads its lock (decided as /leader decides), else 0.",
		ConstLabels: labels,
	}, func() float64 {
		if a.status().Leading {
			return 1
		}
		return 0
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "redislock_agent_long_polls",
		Help:        "Long polls of /leader held now, at most -max-long-polls.",
		ConstLabels: labels,
	}, func() float64 { return float64(a.leader.Held()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "redislock_agent_long_polls_over_cap_total",
		Help:        "Long polls of /leader answered at once, not held, because -max-long-polls were held.",
		ConstLabels: labels,
	}, func() float64 { return float64(a.leader.OverCap()) }))
	return a, nil
}

// Run serves HTTP and campaigns until ctx ends; then it releases the lock
// if it holds it, reports that it does not lead (label, file), stops
// serving HTTP, and returns nil. /leader, /healthz and /metrics are served
// from before the RedisLock is read until after those last reports. It
// returns an error when it cannot listen on Addr or ProbeAddr, or when an
// HTTP server fails (then it ends the campaign as at the end of ctx, and
// returns the server's error); and with a Command, an *ExitError when the
// command's exit (or, with OnLostExit, the end of leadership) ended the
// campaign with a non-zero code. A RedisLock that cannot be read is
// retried with backoff, and the reason shows in /leader and the log.
func (a *Agent) Run(ctx context.Context) error {
	srvs, err := a.listen(ctx)
	if err != nil {
		return err
	}
	// The servers and the campaign, under one errgroup: a server that
	// fails ends the campaign (partsCtx), the campaign's end stops the
	// servers, and Run returns the first error.
	parts, partsCtx := errgroup.WithContext(ctx)
	for _, s := range srvs.all {
		parts.Go(s.serve)
	}
	parts.Go(func() error {
		defer srvs.stop(ctx, a.o.Logger)
		return a.elect(partsCtx)
	})
	return parts.Wait()
}

// elect reads the RedisLock and campaigns for it (see open and campaign)
// until ctx ends or the command run while leading exits, and returns
// campaign's error; nil if ctx ends before the RedisLock could be read.
func (a *Agent) elect(ctx context.Context) error {
	cand := a.open(ctx)
	if cand == nil {
		return nil
	}
	defer cand.Close()
	return a.campaign(ctx, cand)
}

// campaign runs the elector on cand until ctx ends (or the command run
// while leading exits), and beside it, under one errgroup, the pod label
// and leader file (publish) and the hook. Those two run on a context of
// their own that ends once the elector has returned, so that they write
// its last state; campaign returns once all three have. They log their
// failures and retry (see publish and runHooks), so the group's error is
// the elector's; campaign returns it, else the command's *ExitError.
func (a *Agent) campaign(ctx context.Context, cand *redisconn.Candidate) error {
	if cand.Object.Spec.Shards != nil {
		return a.campaignSharded(ctx, cand)
	}
	changed, hooked := make(chan struct{}, 1), make(chan struct{}, 1)
	notify := a.notifier(changed, hooked)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	el, run, err := a.newElector(ctx, cancel, cand, notify)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.mu.Lock()
	a.elector, a.name, a.openErr = el, cand.Name, nil
	a.mu.Unlock()

	reports, endReports := context.WithCancel(context.WithoutCancel(ctx))
	var parts errgroup.Group
	parts.Go(func() error {
		defer endReports()
		if err := el.Run(ctx); err != nil {
			return fmt.Errorf("agent: campaign: %w", err)
		}
		return nil
	})
	a.report(reports, &parts, changed, hooked, cand)
	changes := func() { notify() }
	switch {
	case a.probe.Pod():
		parts.Go(func() error { a.watchPodReady(ctx, changes); return nil })
	case a.health != nil:
		parts.Go(func() error { a.probeHealth(ctx, changes); return nil })
	}
	if err := parts.Wait(); err != nil {
		return err
	}
	if run == nil {
		return nil
	}
	return run.exitErr()
}

// report runs, in parts, what tells of the campaign on cand until reports
// ends: the label and file (publish, on changed) and the hook (runHooks,
// on hooked).
func (a *Agent) report(reports context.Context, parts *errgroup.Group, changed, hooked <-chan struct{}, cand *redisconn.Candidate) {
	parts.Go(func() error { a.publish(reports, changed, cand.Timing.RenewInterval); return nil })
	if a.o.Hook != "" {
		parts.Go(func() error { a.runHooks(reports, hooked, cand.Timing.TTL); return nil })
	}
}

// notifier returns the function each change of leadership calls: it
// wakes the long polls of /leader, the label and file (changed) and the
// hook (hooked), and returns the change's number (hookProgress.ask).
func (a *Agent) notifier(changed, hooked chan struct{}) func() uint64 {
	return func() uint64 {
		n := a.hooks.ask()
		a.changes.Notify(a.o.Clock.Now())
		for _, c := range []chan struct{}{changed, hooked} {
			select {
			case c <- struct{}{}:
			default:
			}
		}
		return n
	}
}

// newElector returns the elector of cand, which calls notify at each
// change, and with Options.Command the runner that runs it while leading;
// the runner ends the campaign (cancel) when the command exits.
func (a *Agent) newElector(ctx context.Context, cancel context.CancelFunc, cand *redisconn.Candidate, notify func() uint64) (*redislock.Elector, *runner, error) {
	eo := redislock.ElectorOptions{
		Name:             cand.Name,
		Timing:           cand.Timing,
		OnStartedLeading: func(context.Context, *redislock.Lock) { notify() },
		OnStoppedLeading: func() { notify() },
		OnNewLeader:      func(string) { notify() },
	}
	if a.health != nil {
		eo.Health, eo.StepDownAfter = a.health, a.o.StepDownAfter
	}
	if a.o.Fencing {
		eo.Admitted = func(ctx context.Context) error {
			return redisconn.AwaitHolder(ctx, a.c, a.o.Lock, a.o.Identity, max(cand.Timing.RenewInterval, fencingReadFloor), a.o.Clock)
		}
	}
	var el *redislock.Elector
	var run *runner
	if len(a.o.Command) > 0 {
		run = newRunner(a, cand.Timing, ctx, cancel)
		eo.OnStartedLeading = func(held context.Context, _ *redislock.Lock) {
			notify()
			run.lead(held, el)
		}
		eo.OnStoppedLeading = func() {
			notify()
			run.waitStopped()
		}
	}
	el, err := cand.Client.NewElector(eo)
	return el, run, err
}

// open reads the RedisLock and opens a lock client for it, retrying with
// backoff until it succeeds or ctx ends (then it returns nil).
func (a *Agent) open(ctx context.Context) *redisconn.Candidate {
	backoff := wait.Backoff{Duration: openBackoffMin, Factor: 2, Cap: openBackoffMax, Steps: math.MaxInt32}
	for {
		cand, err := redisconn.OpenCandidate(ctx, a.c, a.o.Lock, a.o.ClusterID, redislock.Options{
			Identity: a.o.Identity, Clock: a.o.Clock, Logger: a.o.Logger, Metrics: a.metrics,
		})
		if err == nil {
			if err = a.shardable(cand); err != nil {
				cand.Close()
			}
		}
		if err == nil {
			a.o.Logger.Info("campaigning", "lock", cand.Name, "identity", a.o.Identity, "ttl", cand.Timing.TTL.String())
			return cand
		}
		if ctx.Err() != nil {
			return nil
		}
		a.mu.Lock()
		same := a.openErr != nil && a.openErr.Error() == err.Error()
		a.openErr = err
		a.mu.Unlock()
		retryIn := backoff.Step()
		// A retry, not a defect: logged at info once per cause (the
		// reason stays in /leader), the repeats at V(1).
		log := a.o.Logger
		if same {
			log = log.V(1)
		}
		log.Info("cannot campaign yet; retrying", "error", err.Error(), "retryIn", retryIn.String())
		t := a.o.Clock.NewTimer(retryIn)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// status returns the agent's answer now.
func (a *Agent) status() leaderhttp.Status {
	a.mu.Lock()
	el, sh, shards, name, openErr := a.elector, a.sharded, a.shards, a.name, a.openErr
	a.mu.Unlock()
	if sh != nil {
		return statusOfShards(a.o.Identity, name, shards, sh.State())
	}
	if el == nil {
		st := leaderhttp.Status{Identity: a.o.Identity, Lock: a.o.Lock.String(), ObservedAt: a.o.Clock.Now(), Error: "starting"}
		if openErr != nil {
			st.Error = openErr.Error()
		}
		return st
	}
	st := statusOf(a.o.Identity, name, el.State())
	if a.health != nil && !st.Leading {
		// As the elector says it, but at once: it learns of a change
		// at its next wake.
		if hs := a.health.State(); hs.Err != nil {
			st.Error = fmt.Errorf("%w: %w", redislock.ErrUnhealthy, hs.Err).Error()
		}
	}
	return st
}
