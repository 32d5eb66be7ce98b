// Package redistest starts real redis-server processes for tests and stops
// them when the test ends.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/rung"
)

// Start launches a redis-server on a free loopback port for the length of
// t. A missing redis-server fails the test with a message that says how to
// install it: these tests are about a real Redis and never pass without one.
//
// In the unit rung (go test -short) it skips t instead.
func Start(t testing.TB, opts redisproc.Options) *redisproc.Server {
	t.Helper()
	rung.NeedServers(t)
	s, err := redisproc.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartN launches n servers, as the independent nodes of a Redlock.
func StartN(t testing.TB, n int) []*redisproc.Server {
	t.Helper()
	servers := make([]*redisproc.Server, n)
	for i := range servers {
		servers[i] = Start(t, redisproc.Options{})
	}
	return servers
}

// Clients returns one client per server, closed when t ends.
func Clients(t testing.TB, servers ...*redisproc.Server) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// poll is how often the waits below ask a server again.
const poll = 50 * time.Millisecond

// pollUntil calls cond every poll until it reports done or fails, or
// within has passed or ctx has ended, and then returns ctx's error. It is
// wait.PollUntilContextTimeout (immediate), which this package does not
// use: the module of test/bench imports it and does not require
// k8s.io/apimachinery.
func pollUntil(ctx context.Context, within time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if done, err := cond(ctx); err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stateTimeout bounds each command that reads a server's state for a
// failure message, so that a hung server cannot hang the report of it.
const stateTimeout = 2 * time.Second

// WaitUp waits until every server has been up for at least d, as the lock
// engine's restart guard judges it (uptime_in_seconds, a difference of
// whole-second readings, less one second), failing t after d plus 5s.
func WaitUp(t testing.TB, d time.Duration, servers ...*redisproc.Server) {
	t.Helper()
	within := d + 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, s := range servers {
		c := s.Client()
		var up time.Duration
		err := pollUntil(ctx, within, func(ctx context.Context) (bool, error) {
			var err error
			up, err = upAtLeast(ctx, c)
			return up >= d, err
		})
		_ = c.Close()
		if err != nil {
			t.Fatalf("redis-server %s up only %v after waiting %v for %v: %v", s.Addr, up, within, d, err)
		}
	}
}

func upAtLeast(ctx context.Context, c *redis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "uptime_in_seconds")
	if !ok {
		return 0, fmt.Errorf("no uptime_in_seconds in INFO server")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("uptime_in_seconds %q: %w", v, err)
	}
	return time.Duration(n-1) * time.Second, nil
}

// SentinelGroup is a Sentinel-managed deployment: a master, its replicas
// and the Sentinels that watch it under MasterName.
type SentinelGroup struct {
	MasterName string
	// Master is the master the group started with; after a failover,
	// MasterAddr and Server find the current one.
	Master    *redisproc.Server
	Replicas  []*redisproc.Server
	Sentinels []*redisproc.Server
}

// StartSentinelGroup starts a master, replicas replicas of it and
// sentinels Sentinels (quorum 1, down after 1s), and waits until every
// replica is in sync and every Sentinel knows every replica. The replicas
// are in sync before the Sentinels start, so that a Sentinel's first INFO
// of the master lists them; otherwise it learns of them from the next, an
// INFO period (10s) later. The sync may take the master's repl-timeout,
// after which the master would give up on it, and the Sentinels three of
// their INFO periods; past either, t fails with the servers' own state.
func StartSentinelGroup(t testing.TB, replicas, sentinels int) *SentinelGroup {
	t.Helper()
	// The master starts a full sync as soon as a replica asks, rather than
	// waiting 5s for more replicas to ask too.
	g := &SentinelGroup{MasterName: "mymaster", Master: Start(t, redisproc.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})}
	host, port, err := net.SplitHostPort(g.Master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for range replicas {
		g.Replicas = append(g.Replicas, Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}}))
	}
	ctx := context.Background()
	mc := g.Master.Client()
	defer func() { _ = mc.Close() }()
	cfg, err := mc.ConfigGet(ctx, "repl-timeout").Result()
	if err != nil {
		t.Fatalf("CONFIG GET repl-timeout: %v", err)
	}
	replTimeout, err := strconv.Atoi(cfg["repl-timeout"])
	if err != nil {
		t.Fatalf("repl-timeout %q: %v", cfg["repl-timeout"], err)
	}
	within := time.Duration(replTimeout) * time.Second
	err = pollUntil(ctx, within, func(ctx context.Context) (bool, error) {
		return inSync(ctx, mc, replicas), nil
	})
	if err != nil {
		t.Fatalf("%d replicas not in sync within %v (the master's repl-timeout): %v\n%s", replicas, within, err, g.state())
	}
	for range sentinels {
		g.Sentinels = append(g.Sentinels, Start(t, redisproc.Options{SentinelFor: g.MasterName + " " + g.Master.Addr}))
	}
	timing, err := g.timing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	within = 3 * timing.infoPeriod
	err = pollUntil(ctx, within, func(ctx context.Context) (bool, error) {
		return inSync(ctx, mc, replicas) && g.known(ctx, replicas), nil
	})
	if err != nil {
		t.Fatalf("Sentinels do not all know the %d replicas within %v (3 of their INFO periods): %v\n%s", replicas, within, err, g.state())
	}
	return g
}

// WaitConverged waits until the current master has every other server of
// the group as a replica online and every Sentinel knows them, as after
// StartSentinelGroup: after a failover the demoted master and the other
// replicas are reconfigured to the new master one at a time, and a
// deployment that waits for every replica (redislock.WaitAllReplicas)
// grants nothing until they are back. It waits for three of the
// Sentinels' INFO periods plus the repl-timeout.
func (g *SentinelGroup) WaitConverged(ctx context.Context) error {
	timing, err := g.timing(ctx)
	if err != nil {
		return err
	}
	replicas := len(g.Replicas)
	within := 3*timing.infoPeriod + 60*time.Second
	err = pollUntil(ctx, within, func(ctx context.Context) (bool, error) {
		addr, err := g.MasterAddr(ctx)
		if err != nil {
			return false, nil
		}
		mc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer func() { _ = mc.Close() }()
		return inSync(ctx, mc, replicas) && g.known(ctx, replicas), nil
	})
	if err != nil {
		return fmt.Errorf("redistest: the Sentinel group not converged (a master with %d replicas online, known to every Sentinel) within %v: %w\n%s", replicas, within, err, g.state())
	}
	return nil
}

// inSync reports whether the master (mc) has n replicas online.
func inSync(ctx context.Context, mc *redis.Client, n int) bool {
	info, err := mc.Info(ctx, "replication").Result()
	return err == nil && strings.Count(info, "state=online") == n
}

// known reports whether every Sentinel knows n replicas. A backup or
// sync tool (redis-cli --rdb) shows in the master's INFO with port 0, and
// a Sentinel lists it as a replica at port 0, down, until SENTINEL RESET:
// that is no replica, and is not counted.
func (g *SentinelGroup) known(ctx context.Context, n int) bool {
	for _, s := range g.Sentinels {
		sc := g.sentinel(s)
		reps, err := sc.Replicas(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err != nil {
			return false
		}
		listening := 0
		for _, r := range reps {
			if r["port"] != "0" {
				listening++
			}
		}
		if listening != n {
			return false
		}
	}
	return true
}

// Failover forces a failover (SENTINEL FAILOVER on the first Sentinel) and
// returns the master before it and the one promoted, once that Sentinel
// names the new one. Sentinel refuses while a failover is in progress
// (INPROG) and while no replica is fit to promote (NOGOODSLAVE: until it
// has a recent INFO from one), and abandons a failover whose replica is
// not promoted within its failover-timeout; Failover asks again in each
// case. A Sentinel that was starved of CPU for a moment enters TILT mode
// and takes no action for its TILT period, so the deadline is that period
// and two failover attempts (failover-timeout plus an INFO period each),
// all read from the Sentinel. On failure the error holds the state of
// every server of the group.
func (g *SentinelGroup) Failover(ctx context.Context) (old, promoted string, err error) {
	sc := g.sentinel(g.Sentinels[0])
	defer func() { _ = sc.Close() }()
	if old, err = masterAddr(ctx, sc, g.MasterName); err != nil {
		return "", "", err
	}
	timing, err := g.timing(ctx)
	if err != nil {
		return old, "", err
	}
	within := timing.tiltPeriod + 2*(timing.failoverTimeout+timing.infoPeriod)
	requested, accepted := false, 0
	last := "none" // the last refusal or timeout, for the report
	err = pollUntil(ctx, within, func(ctx context.Context) (bool, error) {
		done, err := func() (bool, error) {
			if !requested {
				if err := sc.Failover(ctx, g.MasterName).Err(); err != nil {
					return false, err
				}
				requested, accepted = true, accepted+1
			}
			m, err := sc.Master(ctx, g.MasterName).Result()
			if err != nil {
				return false, err
			}
			// While the failover reconfigures the replicas, Sentinel
			// already names the promoted one.
			if promoted, err = masterAddr(ctx, sc, g.MasterName); err != nil {
				return false, err
			}
			// A failover no longer in progress with no new master was
			// abandoned (the replica was not promoted in time): ask again.
			requested = strings.Contains(m["flags"], "failover_in_progress")
			return promoted != old, nil
		}()
		switch {
		case err == nil:
			return done, nil
		case ctx.Err() != nil: // the deadline, reported below
			return false, nil
		case strings.HasPrefix(err.Error(), "INPROG"), strings.HasPrefix(err.Error(), "NOGOODSLAVE"), isTimeout(err):
			last = err.Error()
			return false, nil
		}
		return false, err
	})
	if err != nil {
		return old, "", fmt.Errorf("redistest: the Sentinel at %s named no new master within %v (its TILT period, and failover-timeout and INFO period twice); %d SENTINEL FAILOVER accepted, last refusal or timeout: %s: %w\n%s",
			g.Sentinels[0].Addr, within, accepted, last, err, g.state())
	}
	return old, promoted, nil
}

// isTimeout reports whether err is a command that timed out, as one may
// on a loaded machine.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sentinelTiming is what a Sentinel is configured to take: for the
// master, from SENTINEL MASTER; for itself, from SENTINEL DEBUG.
type sentinelTiming struct {
	failoverTimeout time.Duration // failover-timeout
	infoPeriod      time.Duration // INFO-PERIOD: how often it reads INFO of each server
	tiltPeriod      time.Duration // TILT-PERIOD: how long it takes no action after a stall
}

// timing reads the first Sentinel's timing.
func (g *SentinelGroup) timing(ctx context.Context) (sentinelTiming, error) {
	sc := g.sentinel(g.Sentinels[0])
	defer func() { _ = sc.Close() }()
	m, err := sc.Master(ctx, g.MasterName).Result()
	if err != nil {
		return sentinelTiming{}, fmt.Errorf("SENTINEL MASTER %s: %w", g.MasterName, err)
	}
	debug := redis.NewMapStringStringCmd(ctx, "sentinel", "debug")
	if err := sc.Process(ctx, debug); err != nil {
		return sentinelTiming{}, fmt.Errorf("SENTINEL DEBUG: %w", err)
	}
	var st sentinelTiming
	for _, f := range []struct {
		into *time.Duration
		from map[string]string
		key  string
	}{
		{&st.failoverTimeout, m, "failover-timeout"},
		{&st.infoPeriod, debug.Val(), "INFO-PERIOD"},
		{&st.tiltPeriod, debug.Val(), "TILT-PERIOD"},
	} {
		if *f.into, err = millis(f.from, f.key); err != nil {
			return sentinelTiming{}, err
		}
	}
	return st, nil
}

// millis reads m[key], a number of milliseconds.
func millis(m map[string]string, key string) (time.Duration, error) {
	n, err := strconv.ParseInt(m[key], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", key, m[key], err)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// state is what each server of the group says of itself, for a failure
// message: each Sentinel's SENTINEL MASTER, its view of the replicas and
// whether it is in TILT mode, and INFO replication of each Redis.
func (g *SentinelGroup) state() string {
	var b strings.Builder
	for _, s := range g.Sentinels {
		sc := g.sentinel(s)
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		m, err := sc.Master(ctx, g.MasterName).Result()
		fmt.Fprintf(&b, "sentinel %s:\n  SENTINEL MASTER %s: %s\n", s.Addr, g.MasterName, pairs(m, err))
		reps, err := sc.Replicas(ctx, g.MasterName).Result()
		if err != nil {
			fmt.Fprintf(&b, "  SENTINEL REPLICAS: error: %v\n", err)
		}
		for _, r := range reps {
			fmt.Fprintf(&b, "  replica %s flags=%s master-link-status=%s master-host=%s master-port=%s slave-repl-offset=%s info-refresh=%s\n",
				r["name"], r["flags"], r["master-link-status"], r["master-host"], r["master-port"], r["slave-repl-offset"], r["info-refresh"])
		}
		info := redis.NewStringCmd(ctx, "info", "sentinel")
		_ = sc.Process(ctx, info)
		fmt.Fprintf(&b, "  INFO sentinel: %s\n", oneLine(info.Val(), info.Err()))
		cancel()
		_ = sc.Close()
	}
	b.WriteString(replicationState("master", g.Master))
	for _, s := range g.Replicas {
		b.WriteString(replicationState("replica", s))
	}
	return b.String()
}

// SentinelAddrs are the Sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// MasterAddr asks the first Sentinel that answers where the master is.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range g.Sentinels {
		sc := g.sentinel(s)
		addr, err := masterAddr(ctx, sc, g.MasterName)
		_ = sc.Close()
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no Sentinel named the master: %w", errors.Join(errs...))
}

// masterAddr asks sc where the master called name is.
func masterAddr(ctx context.Context, sc *redis.SentinelClient, name string) (string, error) {
	addr, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %w", name, err)
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %q is not host and port", name, addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// sentinel returns a client of Sentinel s; the caller closes it.
func (g *SentinelGroup) sentinel(s *redisproc.Server) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
}

// Server returns the server of the group at addr, nil if none.
func (g *SentinelGroup) Server(addr string) *redisproc.Server {
	for _, s := range append([]*redisproc.Server{g.Master}, g.Replicas...) {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// infoField finds field in an INFO reply.
func infoField(info, field string) (string, bool) {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// oneLine is an INFO-style reply on one line, its comments dropped, or
// the error that came instead.
func oneLine(reply string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var fields []string
	for line := range strings.SplitSeq(reply, "\r\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			fields = append(fields, line)
		}
	}
	return strings.Join(fields, " ")
}

// indent is a multi-line reply indented by four spaces, or the error that
// came instead.
func indent(reply string, err error) string {
	if err != nil {
		return "    error: " + err.Error() + "\n"
	}
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(reply), "\n") {
		b.WriteString("    " + strings.TrimRight(line, "\r") + "\n")
	}
	return b.String()
}

// pairs is a map reply as sorted key=value pairs, or the error that came
// instead.
func pairs(m map[string]string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + m[k]
	}
	return strings.Join(kv, " ")
}
