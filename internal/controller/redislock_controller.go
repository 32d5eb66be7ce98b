package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

const (
	// Finalizer is set on RedisLocks whose deletionPolicy is Release, so
	// the controller can release the key before the object goes.
	Finalizer = "redislock.io/release-on-delete"
	// ForceReleaseAnnotation asks the controller to free the lock from its
	// current holder once; the controller removes it when done.
	ForceReleaseAnnotation = "redislock.io/force-release"
	// connectionIndex indexes RedisLocks by the connection they name:
	// "<kind>/<name>".
	connectionIndex = ".spec.connectionRef"
)

// Event reasons.
const (
	EventLeaderChanged       = "LeaderChanged"
	EventRedisUnreachable    = "RedisUnreachable"
	EventForceReleased       = "ForceReleased"
	EventForceReleaseRefused = "ForceReleaseRefused"
	EventReleasedOnDelete    = "ReleasedOnDelete"
	EventNotReleasedOnDelete = "NotReleasedOnDelete"
	EventInvalidSpec         = "InvalidSpec"
)

// RedisLockReconciler reflects each RedisLock's live holder into its
// status.
type RedisLockReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Resync is the longest time between two inspections of a lock.
	// Default: 30s.
	Resync time.Duration
	// APIReader reads from the API server, uncached: the Secrets
	// RedisLocks name (kept for SecretRefresh while their locks work, see
	// SecretRefresh), so that the controller never lists or watches
	// Secrets cluster-wide, and a RedisLock about to be force-released, so
	// that a cache that has not yet seen the annotation's removal never
	// releases the next holder too. Connections are read from the cache.
	// Default: the manager's APIReader.
	APIReader client.Reader
	// ClusterID is this cluster's identity (redisconn.ClusterID), which
	// names the locks of scope Cluster in Redis. Required.
	ClusterID string
	// MaxConcurrentReconciles is how many RedisLocks are reconciled at
	// once, so that locks whose Redis is slow to answer (each call waits
	// up to its nodeTimeout) hold up only that many workers, not the
	// others. Default: 4.
	MaxConcurrentReconciles int
	// Clock tells time: when a holder was observed, when the nodes'
	// eviction policy is due to be read again, and the backoff of a lost
	// subscription. Default: clock.RealClock.
	Clock clock.WithDelayedExecution
	// ConnectPolicy limits what a RedisLock may make the controller
	// connect to. Default: anything.
	ConnectPolicy ConnectPolicy

	clients  *clientCache
	breakers *breakers
	secrets  *secretCache
	own      ownWrites
	pace     pacer
}

// Every write is a patch (metadata, the managed-fields take-over) or an
// apply (status): no update, and no owner references, so no finalizers
// subresource.
// +kubebuilder:rbac:groups=redislock.io,resources=redislocks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=redislock.io,resources=redislocks/status,verbs=patch
// +kubebuilder:rbac:groups=redislock.io,resources=redisconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=redislock.io,resources=clusterredisconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=kube-system,verbs=get

// Reconcile reads one RedisLock's lock from Redis and updates its status
// when something visible changed. It changes only its copy of the object,
// which one deferred write stores (see write), as cluster-api does.
func (r *RedisLockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	var rl v1alpha1.RedisLock
	if err := r.Get(ctx, req.NamespacedName, &rl); err != nil {
		if apierrors.IsNotFound(err) {
			r.clients.forget(req.NamespacedName)
			r.breakers.forget(req.NamespacedName)
			r.own.forget(req.NamespacedName)
			r.pace.forget(req.NamespacedName)
			forgetMetrics(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get redislock: %w", err)
	}
	if r.own.behind(&rl) {
		// Resync as a safety net: this reconcile may have taken the
		// place of a requeue the last one asked for.
		logf.FromContext(ctx).V(1).Info("cache is behind this controller's last write; its watch event starts the next reconcile", "resourceVersion", rl.ResourceVersion)
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	s := newLockScope(ctx, &rl)
	defer func() {
		if err := r.write(ctx, s.before, s.rl); err != nil {
			res, reterr = ctrl.Result{}, kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !rl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// lockScope is one reconcile of one RedisLock: the object as read, the
// object the reconcile changes for the deferred write, and what is derived
// from its spec once.
type lockScope struct {
	// before is the object as read; rl is changed in place.
	before, rl *v1alpha1.RedisLock
	// timing is the lock's timing as candidates use it.
	timing redislock.Timing
	// secrets serves this reconcile's Secrets; set by lockClient.
	secrets *secretReader
	// redisDone reports the outcome of this reconcile's Redis calls to
	// the connection's breaker; set by lockClient, called by finishRedis.
	redisDone func(error)
	// showIn is how long what this reconcile's look saw waits for the
	// lock's turn to show it (see Pacing); 0 when it is shown.
	showIn time.Duration
	log    logr.Logger
}

// finishRedis reports the outcome of the reconcile's Redis calls to the
// connection's breaker, once.
func (s *lockScope) finishRedis(err error) {
	if s.redisDone != nil {
		s.redisDone(err)
		s.redisDone = nil
	}
}

func newLockScope(ctx context.Context, rl *v1alpha1.RedisLock) *lockScope {
	return &lockScope{before: rl.DeepCopy(), rl: rl, timing: redisconn.Timing(rl), log: logf.FromContext(ctx)}
}

// reconcileNormal shows the live holder of a RedisLock that is not being
// deleted, and says when to look next. What goes wrong with the spec or
// Redis is in rl's conditions; an error (a failed force-release) is for
// controller-runtime to retry with backoff.
func (r *RedisLockReconciler) reconcileNormal(ctx context.Context, s *lockScope) (ctrl.Result, error) {
	rl := s.rl
	if rl.Spec.DeletionPolicy == v1alpha1.DeletionRelease {
		controllerutil.AddFinalizer(rl, Finalizer)
	} else {
		controllerutil.RemoveFinalizer(rl, Finalizer)
	}
	rl.Status.EffectiveTiming = &v1alpha1.EffectiveTiming{
		TTL: metav1.Duration{Duration: s.timing.TTL}, RenewInterval: metav1.Duration{Duration: s.timing.RenewInterval}, RenewDeadline: metav1.Duration{Duration: s.timing.RenewDeadline},
	}
	// A reconcile before the lock's next turn to look (see Pacing) only
	// waits for it.
	if wait := r.pace.look(rl, s.timing.RenewInterval, r.Clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	lc, cfg, err := r.lockClient(ctx, s)
	rl.Status.Connection = cfg.Connection
	if errors.Is(err, errNotAsked) {
		// Its servers did not answer other locks just now: shown as
		// unreachable, the last holder kept, without a try of its own.
		applyHolder(rl, cfg, redislock.Holder{}, err, r.Clock.Now())
		observed(rl)
		return ctrl.Result{RequeueAfter: r.nextLook(s, redislock.Holder{}, err)}, nil
	}
	if err != nil {
		setUnusable(rl, err)
		if becameFalse(s.before, rl, v1alpha1.ConditionReady) {
			r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, EventInvalidSpec, "Connect", "%s", conditionMessage(rl, v1alpha1.ConditionReady))
			s.log.Info("cannot use spec", "reason", reasonFor(err), "error", err.Error())
		}
		observed(rl)
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	name := redisconn.LockName(rl, r.ClusterID)
	rl.Status.LockName, rl.Status.ClusterID = name, ""
	if rl.Spec.Scope != v1alpha1.ScopeGlobal {
		rl.Status.ClusterID = r.ClusterID
	}
	if _, ok := rl.Annotations[ForceReleaseAnnotation]; ok {
		if rl.Spec.Shards != nil {
			// A sharded lock has a holder per shard, whose shards move
			// when it leaves or stops renewing: nothing to release
			// here, and no silent success.
			r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, EventForceReleaseRefused, "ForceRelease",
				"annotation %s does not apply to a sharded lock: a candidate's shards move to the others when it stops (delete its pod), within the ttl if it crashed", ForceReleaseAnnotation)
			delete(rl.Annotations, ForceReleaseAnnotation)
		} else if err := r.forceRelease(ctx, s, lc, name); err != nil {
			s.finishRedis(err)
			return ctrl.Result{}, err
		}
	}
	h, err := r.observe(ctx, s, lc, cfg, name)
	s.finishRedis(err)
	if err != nil {
		// A rotated password may be why: read the Secrets anew.
		s.secrets.forget()
	}
	observed(rl)
	return ctrl.Result{RequeueAfter: r.nextLook(s, h, err)}, nil
}

// observe reads the lock's holder and the nodes' eviction policy into rl's
// status, conditions and metrics when the lock has its turn to show them
// (see Pacing; else rl's status stays as read, what the look saw waits,
// and s.showIn says for how long), and then tells a change of holder and
// a new fault once (tell). It returns what Inspect returned.
func (r *RedisLockReconciler) observe(ctx context.Context, s *lockScope, lc *redislock.Client, cfg redisconn.Config, name string) (redislock.Holder, error) {
	rl := s.rl
	shown := rl.Status.DeepCopy()
	r.pace.resume(rl)
	evictionErr := r.checkEviction(ctx, s)
	var (
		h       redislock.Holder
		err     error
		changed bool
	)
	if rl.Spec.Shards != nil {
		var v redislock.ShardsView
		v, err = lc.InspectShards(ctx, name, int(*rl.Spec.Shards))
		changed, h = applyShards(rl, cfg, v, err, r.Clock.Now())
		setShardsMetrics(rl.Namespace, rl.Name, v, err)
	} else {
		h, err = lc.Inspect(ctx, name)
		changed = applyHolder(rl, cfg, h, err, r.Clock.Now())
	}
	if evictionErr != nil && cfg.EvictingNodes == v1alpha1.EvictingNodesRefuse {
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonEvictionPolicy, "candidates refuse these nodes (evictingNodes: Refuse): "+evictionMessage(evictionErr))
	}
	if err != nil {
		countRedisError(rl.Namespace, rl.Name, reasonFor(err))
	}
	var flap flapping
	if s.showIn, flap = r.pace.show(rl, shown, changed, s.timing.RenewInterval, r.Clock.Now()); s.showIn == 0 {
		r.tell(s, flap, h, err, evictionErr)
	}
	// Every reconcile, so that a restarted controller shows the holder
	// before the holder next changes.
	setHolderMetric(rl.Namespace, rl.Name, rl.Status.HolderIdentity)
	return h, err
}

// tell records the Events, log lines and transitions metric of what a look
// shows in rl's status, against s.before, the status shown until now: the
// holder's changes (one event for all of flap's), and each fault that is
// new.
func (r *RedisLockReconciler) tell(s *lockScope, flap flapping, h redislock.Holder, err, evictionErr error) {
	rl := s.rl
	prev := s.before.Status.HolderIdentity
	logFaults(s.log, s.before, rl, h, err)
	switch {
	case rl.Spec.Shards != nil:
		// A sharded lock's holders are its status.shardHolders, and
		// ShardsUnowned tells when shards lack one: no LeaderChanged.
	case flap.changes == 1:
		s.log.Info("holder changed", "from", prev, "to", rl.Status.HolderIdentity, "fence", h.Fence)
		r.Recorder.Eventf(rl, nil, corev1.EventTypeNormal, EventLeaderChanged, "Observe", "holder changed from %q to %q", prev, rl.Status.HolderIdentity)
	case flap.changes > 1:
		over := flap.over.Round(time.Millisecond)
		s.log.Info("holder changed repeatedly", "times", flap.changes, "over", over.String(), "from", prev, "to", rl.Status.HolderIdentity, "fence", h.Fence)
		r.Recorder.Eventf(rl, nil, corev1.EventTypeNormal, EventLeaderChanged, "Observe", "holder changed %d times in the last %v; now %q", flap.changes, over, rl.Status.HolderIdentity)
	}
	// As status.leaderTransitions counts: a handover the controller saw
	// with the lock free between two holders counts too.
	countTransitions(rl.Namespace, rl.Name, rl.Status.LeaderTransitions-s.before.Status.LeaderTransitions)
	if becameFalse(s.before, rl, ConditionEvictionSafe) {
		r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, ReasonEvictionPolicy, "CheckEviction", "%s", evictionMessage(evictionErr))
		s.log.Info("WARNING: Redis can evict lock keys", "error", evictionErr.Error())
	}
	if becameTrue(s.before, rl, v1alpha1.ConditionShardsUnowned) {
		r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, EventShardsUnowned, "Observe", "%s", conditionMessage(rl, v1alpha1.ConditionShardsUnowned))
	}
	if errors.Is(err, redislock.ErrNoQuorum) && becameFalse(s.before, rl, v1alpha1.ConditionRedisReachable) {
		r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, EventRedisUnreachable, "Inspect", "%s", conditionMessage(rl, v1alpha1.ConditionRedisReachable))
		s.log.Info("Redis unreachable", "error", err.Error())
	}
}

// nextLook is when to look again: at the lock's turn to show what this
// look saw, when it waits for one (see Pacing). Else when the holder's key
// would expire, in case it crashed, since expiry sends no message, but no
// sooner than a renewInterval: a key that a server says expires at once
// must not make the controller look again at once. While Redis is
// unreachable, every Resync at the latest (not with the controller's error
// backoff, which grows to many minutes), and sooner: a lock's users retry
// every renewInterval.
func (r *RedisLockReconciler) nextLook(s *lockScope, h redislock.Holder, err error) time.Duration {
	switch {
	case s.showIn > 0:
		return s.showIn
	case errors.Is(err, redislock.ErrNoQuorum):
		return min(r.Resync, s.timing.RenewInterval*4)
	case h.Identity != "" && h.FreeIn > 0 && h.FreeIn < r.Resync:
		return max(h.FreeIn+10*time.Millisecond, s.timing.RenewInterval)
	}
	return r.Resync
}

// checkEviction sets the EvictionSafe condition from the nodes' memory
// policy, read at most once per Resync for each set of nodes (tell tells a
// new risk once, when it is shown). It returns the risk, nil when there is
// none.
func (r *RedisLockReconciler) checkEviction(ctx context.Context, s *lockScope) error {
	rl := s.rl
	err := r.clients.evictionRisk(ctx, client.ObjectKeyFromObject(rl), r.Resync)
	if err == nil {
		setCondition(rl, ConditionEvictionSafe, metav1.ConditionTrue, ReasonNoEviction, "no node can evict lock keys (maxmemory-policy noeviction, or no maxmemory)")
		setEvictionMetric(rl.Namespace, rl.Name, false)
		return nil
	}
	setCondition(rl, ConditionEvictionSafe, metav1.ConditionFalse, ReasonEvictionPolicy, evictionMessage(err))
	setEvictionMetric(rl.Namespace, rl.Name, true)
	return err
}

// becameTrue reports whether condition typ is True now and was not in
// before.
func becameTrue(before, now *v1alpha1.RedisLock, typ string) bool {
	return meta.IsStatusConditionTrue(now.Status.Conditions, typ) && !meta.IsStatusConditionTrue(before.Status.Conditions, typ)
}

// becameFalse reports whether condition typ is False now and was not in
// before, so that a lasting fault is reported once, not at every look.
func becameFalse(before, now *v1alpha1.RedisLock, typ string) bool {
	return meta.IsStatusConditionFalse(now.Status.Conditions, typ) && !meta.IsStatusConditionFalse(before.Status.Conditions, typ)
}

// lockClient resolves the spec and returns the shared lock client for it,
// and the connection's config (what of it resolved, on error).
func (r *RedisLockReconciler) lockClient(ctx context.Context, s *lockScope) (lc *redislock.Client, cfg redisconn.Config, err error) {
	rl := s.rl
	s.secrets = r.secrets.reader(r.Client)
	defer func() {
		if err != nil {
			s.secrets.forget()
		}
	}()
	if cfg, err = r.ConnectPolicy.resolve(ctx, s.secrets, rl); err != nil {
		return nil, cfg, err
	}
	if s.redisDone, err = r.breakers.allow(client.ObjectKeyFromObject(rl), cfg.Key()); err != nil {
		return nil, cfg, err
	}
	defer func() {
		if err != nil {
			s.finishRedis(err)
		}
	}()
	if lc, err = r.clients.get(ctx, client.ObjectKeyFromObject(rl), cfg, redisconn.LockName(rl, r.ClusterID)); err != nil {
		return nil, cfg, err
	}
	// The engine checks what the API server's rules cannot: the drift
	// allowance, whole milliseconds, and a shared connection's nodeTimeout
	// against this lock's ttl.
	if err = lc.CheckTiming(s.timing); err != nil {
		return nil, cfg, err
	}
	return lc, cfg, nil
}

// observed records in rl that the reconcile saw its generation through,
// and sets the Ready metric from its status.
func observed(rl *v1alpha1.RedisLock) {
	rl.Status.ObservedGeneration = rl.Generation
	setReadyMetric(rl.Namespace, rl.Name, meta.FindStatusCondition(rl.Status.Conditions, v1alpha1.ConditionReady))
}

// forceRelease frees the lock once and removes the annotation from rl,
// for the deferred write to store.
func (r *RedisLockReconciler) forceRelease(ctx context.Context, s *lockScope, lc *redislock.Client, name string) error {
	rl := s.rl
	var live v1alpha1.RedisLock
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rl), &live); err != nil {
		return fmt.Errorf("confirm the %s annotation: %w", ForceReleaseAnnotation, err)
	}
	if _, ok := live.Annotations[ForceReleaseAnnotation]; !ok {
		// Done already: the cache had not seen the removal yet, and
		// the lock may have a new holder by now.
		return nil
	}
	rel, err := lc.ForceRelease(ctx, name, s.timing.TTL)
	if err != nil {
		return fmt.Errorf("force release %q: %w", name, err)
	}
	s.log.Info("force-released lock", "lock", name, "holder", rel.Identity, "by", rl.Annotations[ForceReleaseAnnotation], "grantableIn", rel.Wait.String())
	r.Recorder.Eventf(rl, nil, corev1.EventTypeNormal, EventForceReleased, "ForceRelease",
		"released lock %q from holder %q as annotation %s asked; the holder steps down at its next renewal, and no one is granted the lock for %v, until the holder's last renewal runs out",
		name, rel.Identity, ForceReleaseAnnotation, rel.Wait.Round(time.Millisecond))
	delete(rl.Annotations, ForceReleaseAnnotation)
	return nil
}

// reconcileDelete releases the lock of a RedisLock being deleted with the
// Release policy, then removes the finalizer from rl, for the deferred
// write to store, which lets the object go.
func (r *RedisLockReconciler) reconcileDelete(ctx context.Context, s *lockScope) error {
	rl := s.rl
	if !controllerutil.ContainsFinalizer(rl, Finalizer) {
		return nil
	}
	// A cache that has not seen the finalizer go yet must not release the
	// lock a second time, from a holder granted since.
	var live v1alpha1.RedisLock
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rl), &live)
	if apierrors.IsNotFound(err) || (err == nil && !controllerutil.ContainsFinalizer(&live, Finalizer)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("confirm the finalizer: %w", err)
	}
	lc, _, err := r.lockClient(ctx, s)
	if err == nil {
		var rel redislock.Released
		rel, err = lc.ForceRelease(ctx, redisconn.LockName(rl, r.ClusterID), s.timing.TTL)
		s.finishRedis(err)
		if err == nil {
			r.Recorder.Eventf(rl, nil, corev1.EventTypeNormal, EventReleasedOnDelete, "Delete", "released lock from holder %q before deletion; grantable again in %v", rel.Identity, rel.Wait.Round(time.Millisecond))
		}
	}
	if err != nil && !isSpecError(err) {
		// Redis down: retry with backoff rather than leave the key.
		return fmt.Errorf("release on delete: %w", err)
	}
	if err != nil {
		// The spec cannot reach Redis, and will not by waiting: the
		// object goes, and the user learns that its key stayed.
		r.Recorder.Eventf(rl, nil, corev1.EventTypeWarning, EventNotReleasedOnDelete, "Delete", "deleted without releasing the lock (deletionPolicy Release): %v", err)
		s.log.Info("deleted without releasing the lock", "error", err.Error())
	}
	r.clients.forget(client.ObjectKeyFromObject(rl))
	r.breakers.forget(client.ObjectKeyFromObject(rl))
	controllerutil.RemoveFinalizer(rl, Finalizer)
	return nil
}

// SetupWithManager registers the controller: it watches RedisLocks, the
// shared connections they name, and the lock events from Redis. It does
// not watch Secrets: listing them would return their contents, so it only
// gets the ones a lock names, again after SecretRefresh while the lock
// works and at each reconcile while it fails.
func (r *RedisLockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ClusterID == "" {
		return errors.New("controller: ClusterID is empty")
	}
	if r.Resync == 0 {
		r.Resync = 30 * time.Second
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 4
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.secrets = newSecretCache(r.APIReader, r.Clock)
	r.breakers = newBreakers()
	changed := make(chan event.GenericEvent, 1024)
	r.clients = newClientCache(mgr.GetLogger().WithName("redis"), r.Clock, changed)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.clients.closeAll()
		return nil
	})); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.RedisLock{}, connectionIndex, connectionOf); err != nil {
		return fmt.Errorf("index connections: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RedisLock{}).
		Watches(&v1alpha1.RedisConnection{}, handler.EnqueueRequestsFromMapFunc(r.locksUsing(v1alpha1.KindRedisConnection))).
		Watches(&v1alpha1.ClusterRedisConnection{}, handler.EnqueueRequestsFromMapFunc(r.locksUsing(v1alpha1.KindClusterRedisConnection))).
		WatchesRawSource(source.Channel(changed, &handler.EnqueueRequestForObject{})).
		Named("redislock").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.MaxConcurrentReconciles,
			// A safety net: each Redis call has its nodeTimeout (at most
			// redislock.MaxNodeTimeout), and a reconcile makes a few.
			ReconciliationTimeout: reconcileTimeout,
			NewQueue:              fairQueue(mgr.GetLogger(), r.MaxConcurrentReconciles),
		}).
		Complete(r)
}

// connectionOf is the connectionIndex value of a RedisLock.
func connectionOf(o client.Object) []string {
	ref := o.(*v1alpha1.RedisLock).Spec.ConnectionRef
	if ref == nil {
		return nil
	}
	kind := ref.Kind
	if kind == "" {
		kind = v1alpha1.KindRedisConnection
	}
	return []string{string(kind) + "/" + ref.Name}
}

// locksUsing maps a connection of kind to the RedisLocks that name it: in
// its namespace for a RedisConnection, anywhere for a
// ClusterRedisConnection (whose namespace is "").
func (r *RedisLockReconciler) locksUsing(kind v1alpha1.ConnectionKind) handler.MapFunc {
	return func(ctx context.Context, c client.Object) []reconcile.Request {
		var list v1alpha1.RedisLockList
		if err := r.List(ctx, &list, client.InNamespace(c.GetNamespace()), client.MatchingFields{connectionIndex: string(kind) + "/" + c.GetName()}); err != nil {
			logf.FromContext(ctx).Error(err, "list RedisLocks using connection", "kind", kind, "connection", c.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		}
		return reqs
	}
}
