package redisconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// The clients Clients returns, against servers: a hostile one cannot make
// them allocate what it declares, in any mode, and real ones (plain, TLS,
// Sentinel, Cluster) work as before, up to the limits.

// hostileServer listens on 127.0.0.1 for the length of t and answers every
// command with attack, written at once, and then nothing. With handshake,
// it first answers the handshake as a Redis older than 6 would (HELLO
// unknown, so that go-redis falls back to RESP2; CLIENT SETINFO OK), so
// that attack answers the commands themselves.
func hostileServer(t *testing.T, handshake bool, attack string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				_ = c.Close()
			}
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { serveHostile(c, handshake, attack) })
		}
	})
	return l.Addr().String()
}

func serveHostile(c net.Conn, handshake bool, attack string) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		reply := attack
		if handshake {
			switch strings.ToUpper(cmd[0]) {
			case "HELLO":
				reply = "-ERR unknown command 'HELLO'\r\n"
			case "CLIENT":
				reply = "+OK\r\n"
			}
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// readCommand reads a command as clients send it: an array of bulk
// strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	header := func(kind byte) (int, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if line[0] != kind {
			return 0, fmt.Errorf("%q is no %c header", line, kind)
		}
		return strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
	}
	n, err := header('*')
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("command of %d arguments", n)
	}
	args := make([]string, n)
	for i := range args {
		size, err := header('$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// A hostile server, whatever it declares in answer to whichever command
// (the handshake's or the lock engine's), to the nodes' clients or to the
// Sentinels', fails the call at once with ErrReplyTooLarge, having made
// the process allocate next to nothing: without the limits, the first
// attack is a fatal out of memory, and the others allocate a GiB or recurse
// 100000 deep and wait out the timeout.
func TestHostileServerCannotMakeClientsAllocate(t *testing.T) {
	const nodeTimeout = 2 * time.Second
	attacks := []struct {
		name      string
		handshake bool
		attack    string
	}{
		{"a bulk string of 100 GB", true, "$100000000000\r\n"},
		{"a bulk string of 100 GB for HELLO", false, "$100000000000\r\n"},
		{"arrays nested 100000 deep", true, strings.Repeat("*1\r\n", 100000)},
		// 1 GiB of slices without the limits: enough to fail loudly, not
		// enough to threaten the machine.
		{"1024 *65536 headers, each in the last", true, strings.Repeat("*65536\r\n", 1024)},
	}
	modes := []struct {
		mode  v1alpha1.RedisMode
		nodes int // the hostile server's address, that many times
	}{{v1alpha1.ModeStandalone, 1}, {v1alpha1.ModeRedlock, 3}, {v1alpha1.ModeSentinel, 1}, {v1alpha1.ModeCluster, 1}}
	for _, a := range attacks {
		for _, m := range modes {
			t.Run(a.name+"/"+string(m.mode), func(t *testing.T) {
				addr := hostileServer(t, a.handshake, a.attack)
				cfg := Config{Mode: m.mode, NodeTimeout: nodeTimeout}
				if m.mode == v1alpha1.ModeSentinel {
					cfg.MasterName = "mymaster"
				}
				for range m.nodes {
					cfg.Addrs = append(cfg.Addrs, addr)
				}
				nodes := cfg.Clients()
				t.Cleanup(func() {
					for _, n := range nodes {
						_ = n.Close()
					}
				})
				lc, err := redislock.New(nodes, &redislock.Options{NodeTimeout: nodeTimeout})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for _, call := range []struct {
					name string
					do   func() error
				}{
					{"Inspect", func() error { _, err := lc.Inspect(ctx, "hostile"); return err }},
					{"PING", func() error { return nodes[0].Ping(ctx).Err() }},
				} {
					start := time.Now()
					err := call.do()
					took := time.Since(start)
					t.Logf("%s: %v after %v", call.name, err, took)
					if !errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), addr+": ") {
						t.Errorf("%s: %v; want ErrReplyTooLarge, naming %s and the limit", call.name, err, addr)
					}
					if took > nodeTimeout/2 {
						t.Errorf("%s took %v; want well within the %v node timeout", call.name, took, nodeTimeout)
					}
				}
				runtime.ReadMemStats(&after)
				const bound = 64 << 20
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
					t.Errorf("the calls allocated %d MiB; want under %d MiB", alloc>>20, bound>>20)
				} else {
					t.Logf("the calls allocated %d KiB", alloc>>10)
				}
			})
		}
	}
}

// A reply within the limits, of the shapes that cost go-redis most for
// what they count (empty elements; maps, which it sizes for every entry
// declared), makes it allocate a few times maxReply, as the limits' doc
// comment says: about 3 at most, nearly 4 under the race detector, which
// allocates more; the test allows 5.
func TestRepliesWithinTheLimitsCostAFewTimesMaxReply(t *testing.T) {
	for _, shape := range []struct{ name, header, elem string }{
		{"arrays of empty strings", "*%d\r\n", "$0\r\n\r\n"},
		{"arrays of empty arrays", "*%d\r\n", "*0\r\n"},
		{"maps of empty strings", "%%%d\r\n", "$0\r\n\r\n"},
	} {
		t.Run(shape.name, func(t *testing.T) {
			// 8 aggregates of 65536 elements, the last 8 short, all but
			// fill maxReply: 8*16 + (8*65536-8)*16 bytes.
			var b strings.Builder
			b.WriteString("*8\r\n")
			for i := range 8 {
				n := maxElements
				if i == 7 {
					n -= 8
				}
				header := n
				if strings.HasPrefix(shape.header, "%") {
					header /= 2
				}
				fmt.Fprintf(&b, shape.header, header)
				b.WriteString(strings.Repeat(shape.elem, n))
			}
			addr := hostileServer(t, true, b.String())
			cfg := Config{Mode: v1alpha1.ModeStandalone, Addrs: []string{addr}, NodeTimeout: 10 * time.Second}
			c := cfg.Clients()[0]
			t.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			_ = c.Ping(ctx).Err() // a connection, its handshake done
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := c.Do(ctx, "anything").Err()
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("a reply within the limits: %v", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes sent, %d KiB allocated: %.2f times maxReply", b.Len(), alloc>>10, float64(alloc)/maxReply)
			if alloc >= 5*maxReply {
				t.Errorf("allocated %d MiB; want under 5 times maxReply (%d MiB)", alloc>>20, 5*maxReply>>20)
			}
		})
	}
}

// checkClients takes a lock through the clients of cfg, reads INFO, and
// reads values at and over the bulk string limit: all pass, but for the
// value over it, which fails with ErrReplyTooLarge without spoiling the
// next call.
func checkClients(t *testing.T, cfg Config) {
	t.Helper()
	cfg.NodeTimeout = 2 * time.Second
	nodes := cfg.Clients()
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lc, err := redislock.New(nodes, &redislock.Options{AssumeDurable: true, Identity: "replylimit", NodeTimeout: cfg.NodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lc.Obtain(ctx, "replylimit", 10*time.Second)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if h, err := lc.Inspect(ctx, "replylimit"); err != nil || h.Identity != "replylimit" {
		t.Fatalf("Inspect: %+v, %v; want the holder replylimit", h, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	c := nodes[0]
	if info, err := c.Info(ctx, "everything").Result(); err != nil || !strings.Contains(info, "redis_version") {
		t.Fatalf("INFO everything: %d bytes, %v", len(info), err)
	}
	for _, n := range []int{maxBulk, maxBulk + 1} {
		key := fmt.Sprintf("{replylimit}%d", n)
		if err := c.Set(ctx, key, strings.Repeat("v", n), time.Minute).Err(); err != nil {
			t.Fatalf("SET of %d bytes: %v", n, err)
		}
		got, err := c.Get(ctx, key).Result()
		switch {
		case n <= maxBulk && (err != nil || len(got) != n):
			t.Errorf("GET of %d bytes: %d bytes, %v", n, len(got), err)
		case n > maxBulk && !errors.Is(err, ErrReplyTooLarge):
			t.Errorf("GET of %d bytes: %d bytes, %v; want ErrReplyTooLarge", n, len(got), err)
		}
		if err != nil {
			t.Logf("GET of %d bytes: %v", n, err)
		}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after the refused reply: %v", err)
	}
}

// Real servers work through the limits: a plain one, one serving TLS that
// requires a client certificate, a Sentinel's master, a Cluster.
func TestClientsWorkWithRealServers(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := redistest.Start(t, redisproc.Options{})
		checkClients(t, Config{Mode: v1alpha1.ModeStandalone, Addrs: []string{s.Addr}})
	})
	t.Run("Redlock", func(t *testing.T) {
		var addrs []string
		for _, s := range redistest.StartN(t, 3) {
			addrs = append(addrs, s.Addr)
		}
		checkClients(t, Config{Mode: v1alpha1.ModeRedlock, Addrs: addrs})
	})
	t.Run("mutual TLS", func(t *testing.T) {
		s := redistest.Start(t, redisproc.Options{TLS: true, TLSClientAuth: true})
		checkClients(t, Config{Mode: v1alpha1.ModeStandalone, Addrs: []string{s.Addr},
			TLS: true, CAPEM: s.CAPEM, CertPEM: s.ClientCertPEM, KeyPEM: s.ClientKeyPEM})
	})
	t.Run("Sentinel", func(t *testing.T) {
		g := redistest.StartSentinelGroup(t, 0, 1)
		checkClients(t, Config{Mode: v1alpha1.ModeSentinel, Addrs: g.SentinelAddrs(), MasterName: g.MasterName})
	})
	t.Run("Cluster", func(t *testing.T) {
		checkClients(t, Config{Mode: v1alpha1.ModeCluster, Addrs: redistest.StartCluster(t, 3)})
	})
}

// The dialer checks the server's certificate as go-redis's did: against
// the CA given, for the host of the address when no server name is given.
func TestTLSChecksTheServerCertificate(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{TLS: true})
	other := redistest.Start(t, redisproc.Options{TLS: true}) // its CA signs nothing of s
	for _, tt := range []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"the server's CA", Config{CAPEM: s.CAPEM}, ""},
		{"another CA", Config{CAPEM: other.CAPEM}, "x509: certificate signed by unknown authority"},
		{"another name", Config{CAPEM: s.CAPEM, ServerName: "redis.example"}, "not redis.example"},
		{"no check", Config{InsecureSkipVerify: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Mode, cfg.Addrs, cfg.TLS, cfg.NodeTimeout = v1alpha1.ModeStandalone, []string{s.Addr}, true, 2*time.Second
			c := cfg.Clients()[0]
			defer func() { _ = c.Close() }()
			err := c.Ping(context.Background()).Err()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("PING: %v; want %q", err, tt.want)
			}
		})
	}
}

// BenchmarkReplyLimit compares GET of a small value on a real server
// through the limits and without, one after the other in each iteration
// (in turn first), so that both see the same machine; it reports each
// one's time and their ratio.
func BenchmarkReplyLimit(b *testing.B) {
	s := redistest.Start(b, redisproc.Options{})
	client := func(limited bool) *redis.Client {
		o := s.ClientOptions()
		dial := redis.NewDialer(o)
		if limited {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return limitReplies(c, addr), nil
			}
		}
		c := redis.NewClient(o)
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := context.Background()
	clients := []*redis.Client{client(true), client(false)}
	if err := clients[0].Set(ctx, "bench", "a lock value of about forty bytes, like ours", 0).Err(); err != nil {
		b.Fatal(err)
	}
	var took [2]time.Duration
	b.ResetTimer()
	for n := range b.N {
		for k := range clients {
			i := (n + k) % 2
			c := clients[i]
			start := time.Now()
			if err := c.Get(ctx, "bench").Err(); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "limited-ns/get")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "plain-ns/get")
	b.ReportMetric(float64(took[0])/float64(took[1]), "ratio")
}

// BenchmarkFramer is the cost of the check alone, per byte of replies.
func BenchmarkFramer(b *testing.B) {
	for _, bm := range []struct{ name, in string }{
		{"GET reply", strings.Repeat(bulk(40), 100)},
		{"CLUSTER SLOTS", clusterSlots()},
		{"INFO", bulk(8 << 10)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			in := []byte(bm.in)
			b.SetBytes(int64(len(in)))
			for range b.N {
				f := framer{}
				if err := f.check(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
