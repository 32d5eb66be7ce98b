package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// longPollRequest is a long poll of /leader as a client writes it.
const longPollRequest = "GET /leader?wait=5m HTTP/1.1\r\nHost: agent\r\n\r\n"

// leadingAgent runs an agent of o (Lock, Identity and unset addresses
// filled in) for a RedisLock on a real redis-server, with adjust applied
// before it runs, and returns it once it leads; it stops when t ends.
// Addr (and a ProbeAddr of ":0") get free ports.
func leadingAgent(t *testing.T, o Options, adjust func(*Agent)) *Agent {
	t.Helper()
	ctx := context.Background()
	lock, _ := lockOnNewServer(t, "agent-http-", nil)
	o.Lock, o.Identity, o.ClusterID = lock, "pod-a", "test-cluster"
	if o.Addr == "" {
		o.Addr = "127.0.0.1:" + freePort(t)
	}
	if o.ProbeAddr == ":0" {
		o.ProbeAddr = ":" + freePort(t)
	}
	a, err := New(restConfig, o)
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(a)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	url := "http://" + loopback(o.Addr) + "/leader"
	waitFor(t, 30*time.Second, "the agent to lead", func() bool {
		_, code, err := leaderhttp.Get(ctx, url)
		return err == nil && code == http.StatusOK
	})
	// Kept alive, the connection it was asked on would count against the
	// agent's cap until the idle timeout.
	http.DefaultClient.CloseIdleConnections()
	return a
}

// lockOnNewServer creates, in a new namespace named from prefix, the
// RedisLock "lock" on a new redis-server, with a ttl of 2s and edit
// applied, and returns it and the server.
func lockOnNewServer(t *testing.T, prefix string, edit func(*v1alpha1.RedisLock)) (types.NamespacedName, *redisproc.Server) {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t, redisproc.Options{})
	admin, err := testenv.Client(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lock"},
		Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{srv.Addr}},
			TTL: &v1alpha1.Duration{Duration: 2 * time.Second}}} // the restart guard holds a fresh node back for a ttl
	if edit != nil {
		edit(rl)
	}
	if err := admin.Create(ctx, rl); err != nil {
		t.Fatal(err)
	}
	return types.NamespacedName{Namespace: ns.Name, Name: "lock"}, srv
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// loopback is addr as a client on this host dials it.
func loopback(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// waitFor fails t unless cond holds within d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// request opens a connection to addr and writes raw on it; the connection is
// closed when t ends.
func request(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads one HTTP answer from c within d, and its body.
func answer(c net.Conn, r *bufio.Reader, d time.Duration) (*http.Response, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// metric returns the value of the agent's series name, from its /metrics
// at addr.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + loopback(addr) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, name+"{") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' '):]), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s:\n%s", name, b)
	return 0
}

// closedWithin reports whether the server closed c within d, and after how
// long; any data it sends first is read and dropped.
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !errors.As(err, &ne) || !ne.Timeout(), time.Since(start)
}

// silent reports whether c has nothing to read and is open.
func silent(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	return n == 0 && errors.As(err, &ne) && ne.Timeout()
}

// Long polls beyond -max-long-polls are answered at once, with the current
// status and Retry-After, while the ones held stay held.
func TestLongPollsBeyondTheCapAreAnsweredAtOnce(t *testing.T) {
	const held, extra = 8, 8
	a := leadingAgent(t, Options{MaxConnections: 64, MaxLongPolls: held}, nil)
	var polls []net.Conn
	for range held {
		polls = append(polls, request(t, a.o.Addr, longPollRequest))
	}
	waitFor(t, 10*time.Second, "the long polls to be held", func() bool {
		return metric(t, a.o.Addr, "redislock_agent_long_polls") == held
	})
	var slowest time.Duration
	for i := range extra {
		start := time.Now()
		c := request(t, a.o.Addr, longPollRequest)
		resp, body, err := answer(c, bufio.NewReader(c), 10*time.Second)
		if err != nil {
			t.Fatalf("long poll %d beyond the cap: %v", i+1, err)
		}
		slowest = max(slowest, time.Since(start))
		var st leaderhttp.Status
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Retry-After") != "1" || json.Unmarshal(body, &st) != nil || !st.Leading {
			t.Errorf("long poll beyond the cap: %d %v %s; want the leader's status, 200, with Retry-After: 1", resp.StatusCode, resp.Header, body)
		}
	}
	t.Logf("%d long polls beyond the cap of %d answered, the slowest in %v", extra, held, slowest)
	if slowest > 2*time.Second {
		t.Errorf("a long poll beyond the cap took %v to be answered; want at once", slowest)
	}
	if n := metric(t, a.o.Addr, "redislock_agent_long_polls"); n != held {
		t.Errorf("%v long polls held after the extras, want the first %d", n, held)
	}
	if n := metric(t, a.o.Addr, "redislock_agent_long_polls_over_cap_total"); n != extra {
		t.Errorf("%v long polls counted over the cap, want %d", n, extra)
	}
	for i, c := range polls {
		if !silent(c) {
			t.Errorf("held long poll %d was answered or closed", i+1)
		}
	}
}

// With 2,000 connections opened at once, each asking a long poll, the agent
// accepts -max-connections of them, holds -max-long-polls, answers the
// rest of those at once and leaves the others in the kernel's queue, so
// its heap stays bounded; its probe server answers meanwhile.
func TestManyConnectionsKeepTheHeapBounded(t *testing.T) {
	const attempts = 2000
	a := leadingAgent(t, Options{ProbeAddr: ":0"}, nil)
	before := inUse()
	var conns []net.Conn
	for range attempts {
		c, err := net.DialTimeout("tcp", a.o.Addr, time.Second)
		if err != nil {
			t.Logf("dial %d: %v; the rest not tried", len(conns)+1, err)
			break
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, longPollRequest); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	admitted := func() int { return a.leader.Held() + int(a.leader.OverCap()) }
	waitFor(t, 30*time.Second, "the agent to take as many connections as it may", func() bool {
		return admitted() >= DefaultMaxConnections
	})
	grew := int64(inUse()) - int64(before)
	t.Logf("%d connections opened; %d held, %d answered at once; heap and stacks grew %.1f MiB, %.1f KiB per connection taken",
		len(conns), a.leader.Held(), a.leader.OverCap(), float64(grew)/(1<<20), float64(grew)/1024/float64(admitted()))
	if n := admitted(); n != DefaultMaxConnections || a.leader.Held() != DefaultMaxLongPolls {
		t.Errorf("the agent took %d connections and holds %d long polls; want %d and %d", n, a.leader.Held(), DefaultMaxConnections, DefaultMaxLongPolls)
	}
	// About 21 KiB a connection, and the test's own ends of the 2,000.
	if limit := int64(DefaultMaxConnections*32<<10 + attempts*2<<10); grew > limit {
		t.Errorf("heap and stacks grew by %d bytes, over %d", grew, limit)
	}
	resp, err := http.Get("http://" + loopback(a.o.ProbeAddr) + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz on the probe server while /leader's is full: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}
}

// inUse returns the live heap and the goroutine stacks, after a collection.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// A kept-alive connection that carries no request is closed within the idle
// timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	a := leadingAgent(t, Options{}, func(a *Agent) { a.timeouts.idle = idle })
	c := request(t, a.o.Addr, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	if resp, _, err := answer(c, bufio.NewReader(c), 10*time.Second); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("/healthz: %v %v; want 200, kept alive", resp, err)
	}
	closed, after := closedWithin(c, 10*time.Second)
	t.Logf("idle connection closed %t after %v (idle timeout %v)", closed, after, idle)
	if !closed || after > idle+5*time.Second {
		t.Errorf("idle connection closed %t after %v; want closed within %v", closed, after, idle)
	}
}

// A client that sends its request line or headers slowly is cut off, and
// one whose headers are too long is refused.
func TestSlowOrLongHeadersAreCutOff(t *testing.T) {
	const readHeader = 300 * time.Millisecond
	a := leadingAgent(t, Options{}, func(a *Agent) { a.timeouts.readHeader = readHeader })
	c := request(t, a.o.Addr, "GET /leader?wai")
	closed, after := closedWithin(c, 10*time.Second)
	t.Logf("half a request line: closed %t after %v (header timeout %v)", closed, after, readHeader)
	if !closed || after > readHeader+5*time.Second {
		t.Errorf("half a request line: closed %t after %v; want closed within %v", closed, after, readHeader)
	}
	c = request(t, a.o.Addr, "GET /leader HTTP/1.1\r\nHost: agent\r\nX-Pad: "+strings.Repeat("x", 16<<10)+"\r\n\r\n")
	// The server closes the connection on the headers it did not read, so
	// the answer's status line is all a client may get.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers: %v %v; want 431", resp, err)
	}
}

// A long poll outlasts the server's read and write timeouts, which bound
// the other requests.
func TestLongPollOutlastsTheServerTimeouts(t *testing.T) {
	const timeout, wait = 300 * time.Millisecond, 1500 * time.Millisecond
	a := leadingAgent(t, Options{}, func(a *Agent) { a.timeouts.read, a.timeouts.write = timeout, timeout })
	start := time.Now()
	c := request(t, a.o.Addr, fmt.Sprintf("GET /leader?wait=%v HTTP/1.1\r\nHost: agent\r\n\r\n", wait))
	resp, body, err := answer(c, bufio.NewReader(c), 10*time.Second)
	took := time.Since(start)
	var st leaderhttp.Status
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(body, &st) != nil || !st.Leading {
		t.Fatalf("long poll of %v with server timeouts of %v: %v %v %s; want the leader's status", wait, timeout, resp, err, body)
	}
	if took < wait {
		t.Errorf("long poll of %v answered after %v: cut short", wait, took)
	}
}

// With /leader on 127.0.0.1 and the probes on their own server, the pod's
// address serves /healthz and /metrics, and not /leader.
func TestLoopbackLeaderWithProbesOnThePodAddress(t *testing.T) {
	pod := podAddress(t)
	a := leadingAgent(t, Options{ProbeAddr: ":0"}, nil)
	_, probePort, _ := net.SplitHostPort(a.o.ProbeAddr)
	_, leaderPort, _ := net.SplitHostPort(a.o.Addr)
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/metrics": http.StatusOK, "/leader": http.StatusNotFound} {
		resp, err := http.Get("http://" + net.JoinHostPort(pod, probePort) + path)
		if err != nil {
			t.Fatalf("%s on the pod address: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s on the pod address: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if _, err := net.DialTimeout("tcp", net.JoinHostPort(pod, leaderPort), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial /leader's port on the pod address: %v, want connection refused", err)
	}
	if _, code, err := leaderhttp.Get(context.Background(), "http://"+a.o.Addr+"/leader"); err != nil || code != http.StatusOK {
		t.Errorf("/leader on 127.0.0.1: %d %v, want 200", code, err)
	}
}

// podAddress returns an address of this host other than loopback, as a
// pod's own address.
func podAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	t.Skip("no address other than loopback to serve the probes on")
	return ""
}
