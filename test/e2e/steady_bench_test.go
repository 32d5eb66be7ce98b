package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/kubernetes"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// TestSteadyStateBenchmark measures what an election costs while its leader
// is stable (E1), for our election in its two forms, the agent (`redislock
// agent`, as the webhook injects it) and the Go plugin (the sample operator
// with pkg/election), against controller-runtime's Lease election (the
// sample operator with -election=lease), at each number of candidates in
// STEADY_CANDIDATES. Each case has a namespace of its own and, for Redis, a
// redis-server and a `redislock controller` of its own; its candidates
// start, a leader settles, and then, over the window, it counts:
//   - the commands the redis-server executed (INFO commandstats; those
//     scripts run count too), the controller's included: they are what our
//     election costs Redis. The table sets the scripts (lock operations)
//     beside E1's natural rate (redisstats.Natural), the controller
//     counted as one more standby;
//   - the API server's requests on the election's resources
//     (electionResources), from kube-apiserver's own apiserver_request_total,
//     split into writes and reads: the same count for every method.
//
// The API server's counters are global, so the cases run one after the
// other, each stopping its processes before the next; a first case with no
// candidates at all ("none") shows what the counts pick up on their own
// (nothing, with the API server's identity Lease off: see TestMain). It
// fails if the leader changed during a window. It prints a markdown table;
// `make bench` runs it.
//
//	STEADY_CANDIDATES  numbers of candidates, comma-separated (required;
//	                   1,5,20 in make bench)
//	STEADY_DURATIONS   LeaseDuration,RenewDeadline,RetryPeriod (default
//	                   15s,10s,2s, controller-runtime's defaults); for
//	                   Redis the RedisLock's ttl,renewDeadline,renewInterval
//	STEADY_WINDOW      how long to count, once the leader settled (default
//	                   60s); the rates use the measured time
//	STEADY_JSON        a file to write the results to, for
//	                   test/bench/cmd/benchreport (optional)
func TestSteadyStateBenchmark(t *testing.T) {
	candidatesEnv := os.Getenv("STEADY_CANDIDATES")
	if candidatesEnv == "" {
		t.Skip("STEADY_CANDIDATES is unset: the steady-state benchmark takes minutes; run `make bench` or set STEADY_CANDIDATES=1,5,20")
	}
	var counts []int
	for f := range strings.SplitSeq(candidatesEnv, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("STEADY_CANDIDATES=%q: want positive numbers, comma-separated", candidatesEnv)
		}
		counts = append(counts, n)
	}
	d := parseDurations(t, "STEADY_DURATIONS", "15s,10s,2s")
	window, err := time.ParseDuration(envOr("STEADY_WINDOW", "60s"))
	if err != nil || window <= 0 {
		t.Fatalf("STEADY_WINDOW=%q: want a positive duration", os.Getenv("STEADY_WINDOW"))
	}
	t.Logf("candidates %v; LeaseDuration/ttl %v, RenewDeadline %v, RetryPeriod/renewInterval %v; window %v", counts, d.lease, d.renew, d.retry, window)

	bins := steadyBinaries{redislock: goBuild(t, "."), operator: goBuild(t, "./test/e2e/sampleoperator")}
	var results []steadyResult
	run := func(name, method string, n int, measure func(t *testing.T) steadyCost) {
		t.Run(name, func(t *testing.T) {
			c := measure(t)
			if t.Failed() {
				return
			}
			r := steadyResult{method: method, candidates: n, steadyCost: c}
			redisLog := "none"
			if c.redis != nil {
				redisLog = fmt.Sprint(c.redis)
			}
			t.Logf("%s, candidates=%d, over %v: Redis %s; API %v", method, n, c.took.Round(time.Millisecond), redisLog, c.api)
			results = append(results, r)
		})
	}
	run("none", "none", 0, func(t *testing.T) steadyCost { return countSteady(t, nil, window) })
	for _, method := range []string{"agent", "plugin", "lease"} {
		for _, n := range counts {
			run(fmt.Sprintf("%s/candidates=%d", method, n), method, n, func(t *testing.T) steadyCost {
				return steadyCase(t, bins, method, n, d, window)
			})
		}
	}
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nSteady state, a stable leader, counted over %v; LeaseDuration %v, RenewDeadline %v, RetryPeriod %v (for Redis: ttl, renewDeadline, renewInterval); one redis-server\n\n", window, d.lease, d.renew, d.retry)
	b.WriteString("| method | candidates | Redis commands/s | Redis scripts/s | E1 natural scripts/s | API writes/min | API reads/min |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		j := r.json(d)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.1f | %.1f |\n", r.method, r.candidates,
			perSecond(j.RedisCommandsPerSecond), perSecond(j.RedisScriptsPerSecond), perSecond(j.NaturalScriptsPerSecond),
			j.APIWritesPerMinute, j.APIReadsPerMinute)
	}
	fmt.Print(b.String())
	if path := os.Getenv("STEADY_JSON"); path != "" {
		out := benchresult.SteadyState{Window: window.String(), Timing: d.timing()}
		for _, r := range results {
			out.Cases = append(out.Cases, r.json(d))
		}
		writeJSON(t, path, out)
	}
}

type steadyBinaries struct{ redislock, operator string }

type steadyResult struct {
	method     string
	candidates int
	steadyCost
}

// json turns r into rates over its measured window.
func (r steadyResult) json(d durations) benchresult.SteadyCase {
	s := r.took.Seconds()
	j := benchresult.SteadyCase{Method: r.method, Candidates: r.candidates, Seconds: s,
		APIWritesPerMinute: r.api.writes() * 60 / s, APIReadsPerMinute: r.api.reads() * 60 / s}
	if r.redis != nil {
		commands, scripts := float64(r.redis.Total())/s, float64(r.redis.Scripts())/s
		// n-1 standbys, and the controller, which inspects the lock about
		// once per ttl as one more standby would.
		natural := redisstats.Natural(time.Second, d.lease, d.retry, r.candidates)
		j.RedisCommandsPerSecond, j.RedisScriptsPerSecond, j.NaturalScriptsPerSecond = &commands, &scripts, &natural
	}
	return j
}

// perSecond formats a rate, or "–" for none.
func perSecond(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// steadyCase starts n candidates of method, waits for a settled leader,
// counts over window, and fails t if the leader changed meanwhile.
func steadyCase(t *testing.T, bins steadyBinaries, method string, n int, d durations, window time.Duration) steadyCost {
	t.Helper()
	// The restart guard grants the lock once Redis has been up a ttl.
	leaderWithin := 2*d.lease + 30*time.Second
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", method, i+1)
	}
	if method == "lease" {
		ns := newNamespace(t)
		return steadyFleet(t, newFleet(t, bins.operator, leaseArgs(ns, d)), ids, nil, d, leaderWithin, window)
	}
	s, ns, name := startRedisLock(t, d)
	rc := redistest.Clients(t, s)[0]
	if method == "plugin" {
		return steadyFleet(t, newFleet(t, bins.operator, redisArgs(ns, name)), ids, rc, d, leaderWithin, window)
	}

	// The cluster's identity as the webhook passes it (-cluster-id): the
	// agent's role has no get on namespaces.
	fl := &agentFleet{t: t, bin: bins.redislock, ns: ns, lock: name, kubeconfig: agentUser(t, ns), clusterID: clusterIDOf(t, apiServer(t)),
		dir: t.TempDir(), procs: map[string]*agentProc{}}
	// The pods the agents label, as the webhook's pods would be.
	var pods strings.Builder
	pods.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for _, id := range ids {
		fmt.Fprintf(&pods, "- {apiVersion: v1, kind: Pod, metadata: {name: %s}, spec: {containers: [{name: app, image: example.test/app:1}]}}\n", id)
	}
	if out, err := kubectlIn(t, pods.String(), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl create pods: %v\n%s", err, out)
	}
	for _, id := range ids {
		fl.start(id, freeAddr(t))
	}
	redistest.WaitUp(t, d.lease, s)
	leader, fence := agentLeader(t, fl, leaderWithin, d.settle())
	c := countSteady(t, rc, window)
	if after, afterFence := agentLeader(t, fl, 10*time.Second, 0); after != leader || afterFence != fence {
		t.Errorf("the leader changed during the window: %s (fencing token %d), then %s (%d)", leader, fence, after, afterFence)
	}
	return c
}

// agentLeader waits for one agent to lead, checks that it and only it
// leads for steady (if not zero), and returns it and its fencing token.
// Its poller runs only meanwhile, not in a counting window.
func agentLeader(t *testing.T, fl *agentFleet, within, steady time.Duration) (string, int64) {
	t.Helper()
	p := startPoller(fl)
	defer p.stop()
	leader := p.waitLeader(t, "", within)
	if steady > 0 {
		p.steady(t, steady)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.last[leader]; s.code == http.StatusOK {
		return leader, s.st.FencingToken
	}
	t.Fatalf("%s no longer answers 200", leader)
	return "", 0
}

// steadyFleet starts the sample operators ids on f, waits for a settled
// leader, counts over window (Redis through rc, if not nil), and fails t
// if a replica printed LEADING or exited meanwhile.
func steadyFleet(t *testing.T, f *fleet, ids []string, rc redis.UniversalClient, d durations, leaderWithin, window time.Duration) steadyCost {
	t.Helper()
	for _, id := range ids {
		f.start(id)
	}
	f.waitLeading(0, "", leaderWithin)
	f.waitStarted(len(ids), time.Minute)
	f.settle(d.settle())
	from := f.mark()
	c := countSteady(t, rc, window)
	f.mu.Lock()
	during := slices.Clone(f.journal[from:])
	f.mu.Unlock()
	if len(during) > 0 {
		t.Errorf("the election changed during the window:\n%v", during)
	}
	return c
}

// steadyCost is what a case cost over a window.
type steadyCost struct {
	took  time.Duration
	redis redisstats.Counts // nil without Redis
	api   apiRequests
}

// countSteady counts, over window, the commands the redis-server behind rc
// executed (when rc is not nil) and the API server's requests on the
// election's resources. took is the redisstats.Window's, between the two
// readings of Redis.
func countSteady(t *testing.T, rc redis.UniversalClient, window time.Duration) steadyCost {
	t.Helper()
	ctx := context.Background()
	var clients []redis.UniversalClient
	if rc != nil {
		clients = append(clients, rc)
	}
	w, err := redisstats.Begin(ctx, clients...)
	if err != nil {
		t.Fatal(err)
	}
	apiBefore := readAPIRequests(t, electionResources)
	time.Sleep(window) // the counting window, not a wait for a condition
	counts, took, err := w.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := steadyCost{took: took, api: readAPIRequests(t, electionResources).sub(apiBefore)}
	if rc != nil {
		// Less the INFO of the first reading, which counts in the second.
		c.redis = counts[0].Sub(redisstats.Counts{"info": 1})
	}
	return c
}

// electionResources are the API resources an election touches: Leases
// (Lease election), RedisLocks and their status (the plugin and agent read
// them, the controller writes the status), Events (on a change of leader),
// Pods (the agent's leader label) and Secrets (the Redis password).
var electionResources = []string{"leases", "redislocks", "events", "pods", "secrets"}

// writeVerbs and readVerbs are apiserver_request_total's verbs.
var (
	writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
	readVerbs  = []string{"GET", "LIST", "WATCH"}
)

// apiRequests counts the API server's requests on electionResources by
// "VERB resource[/subresource]", from its apiserver_request_total, which
// counts a request when it ends (a watch, when it closes).
type apiRequests map[string]float64

// readAPIRequests reads apiserver_request_total on resources from
// kube-apiserver's /metrics through the envtest rest config.
func readAPIRequests(t *testing.T, resources []string) apiRequests {
	t.Helper()
	cs, err := kubernetes.NewForConfig(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET /metrics of the API server: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("/metrics of the API server: %v", err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		t.Fatal("/metrics of the API server has no apiserver_request_total")
	}
	a := apiRequests{}
	for _, m := range fam.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if !slices.Contains(resources, l["resource"]) {
			continue
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		a[key] += m.GetCounter().GetValue()
	}
	return a
}

// sub returns a less an earlier reading.
func (a apiRequests) sub(earlier apiRequests) apiRequests {
	d := apiRequests{}
	for k, v := range a {
		if v -= earlier[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

func (a apiRequests) count(verbs []string) float64 {
	var n float64
	for k, v := range a {
		if verb, _, _ := strings.Cut(k, " "); slices.Contains(verbs, verb) {
			n += v
		}
	}
	return n
}

func (a apiRequests) writes() float64 { return a.count(writeVerbs) }
func (a apiRequests) reads() float64  { return a.count(readVerbs) }

// String lists the counts in a stable order, for the logs.
func (a apiRequests) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(a)) {
		fmt.Fprintf(&b, "%s=%g ", k, a[k])
	}
	return strings.TrimSpace(b.String())
}
