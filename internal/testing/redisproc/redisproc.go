// Package redisproc runs throwaway redis-server processes on free loopback
// ports, for tests and the demo. Each server keeps no data on disk, dies with
// the process that started it (Linux parent-death signal), and is stopped by
// Stop.
package redisproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/redislock/redislock/internal/testing/proc"
)

// ErrNotInstalled means the server program (Program) is not on PATH.
var ErrNotInstalled = errors.New("redisproc: the server program not found on PATH; run 'make test' (it installs redis-server and valkey-server as root) or apt-get install redis-server")

// ServerEnv names the environment variable that picks the server program
// every Server runs: redis-server by default; valkey-server runs the same
// tests on Valkey (make test does both for the lock engine).
const ServerEnv = "REDISLOCK_TEST_SERVER"

// Program is the server program Servers run: $REDISLOCK_TEST_SERVER, or
// redis-server.
func Program() string {
	if p := os.Getenv(ServerEnv); p != "" {
		return p
	}
	return "redis-server"
}

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Options configures a server. The zero value is a plain server.
type Options struct {
	// Password, when set, is required of clients (requirepass).
	Password string
	// Args are extra redis-server arguments, such as "--replicaof".
	Args []string
	// TLS, when set, serves TLS only, with a certificate for 127.0.0.1
	// from a CA made for this server (Server.CAPEM).
	TLS bool
	// TLSClientAuth, with TLS, requires clients to present a certificate
	// signed by the server's CA (tls-auth-clients yes), such as
	// Server.ClientCertPEM.
	TLSClientAuth bool
	// SentinelFor, when set, runs a Sentinel (redis-server --sentinel)
	// that monitors this master, as "name host:port", with quorum 1.
	SentinelFor string
}

// Server is one redis-server process.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	// CAPEM is the CA that signs the server's certificate, with TLS.
	CAPEM []byte
	// ClientCertPEM and ClientKeyPEM are a client certificate signed by
	// that CA and its key, with TLS.
	ClientCertPEM, ClientKeyPEM []byte

	opts Options
	cert tls.Certificate // ClientCertPEM and ClientKeyPEM
	dir  string
	p    *proc.Process // nil once killed
}

// Start launches a server on a free loopback port and waits until it
// answers PING.
func Start(opts Options) (*Server, error) {
	path, err := exec.LookPath(Program())
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotInstalled, Program())
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	port, err := proc.FreePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), opts: opts, dir: dir}
	if opts.TLS {
		f, err := writeTLSFiles(dir)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.CAPEM, s.ClientCertPEM, s.ClientKeyPEM = f.CA, f.ClientCert, f.ClientKey
		if s.cert, err = tls.X509KeyPair(f.ClientCert, f.ClientKey); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redisproc: %w", err)
		}
	}
	if err := s.launch(path); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) launch(path string) error {
	_, port, _ := net.SplitHostPort(s.Addr)
	var args []string
	if s.opts.SentinelFor != "" {
		name, addr, _ := strings.Cut(s.opts.SentinelFor, " ")
		host, mport, _ := net.SplitHostPort(addr)
		conf := filepath.Join(s.dir, "sentinel.conf")
		// Sentinel rewrites its config file, so it gets one of its own.
		body := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n", name, host, mport, name, name)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return fmt.Errorf("redisproc: %w", err)
		}
		args = append(args, conf, "--sentinel")
	}
	if s.opts.TLS {
		auth := "no"
		if s.opts.TLSClientAuth {
			auth = "yes"
		}
		args = append(args, "--port", "0", "--tls-port", port,
			"--tls-cert-file", filepath.Join(s.dir, "cert.pem"), "--tls-key-file", filepath.Join(s.dir, "key.pem"),
			"--tls-ca-cert-file", filepath.Join(s.dir, "ca.pem"), "--tls-auth-clients", auth)
	} else {
		args = append(args, "--port", port)
	}
	args = append(args,
		"--bind", "127.0.0.1", "--dir", s.dir,
		// No persistence: no snapshots, no AOF, and, for a replica, not
		// the RDB of its last full sync either (rdb-del-sync-files), which
		// Redis keeps by default and loads at the next start: a restart
		// would bring back that older state, not an empty server.
		"--save", "", "--appendonly", "no", "--rdb-del-sync-files", "yes", "--daemonize", "no",
		"--protected-mode", "no", "--loglevel", "warning",
	)
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	args = append(args, s.opts.Args...)
	p, err := proc.Start(proc.Options{Name: "redis-server on " + s.Addr, Path: path, Args: args, Log: s.logPath()})
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	s.p = p
	o := s.ClientOptions()
	o.MaxRetries = -1
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	if err := p.WaitReady(context.Background(), startTimeout, func(ctx context.Context) (bool, error) {
		return c.Ping(ctx).Err() == nil, nil
	}); err != nil {
		s.kill()
		return fmt.Errorf("redisproc: %w", err)
	}
	return nil
}

// Client returns a new client for the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(s.ClientOptions())
}

// ClientOptions returns client options for the server, with timeouts that
// follow the caller's context, and the client certificate when the server
// requires one.
func (s *Server) ClientOptions() *redis.Options {
	o := &redis.Options{
		Addr: s.Addr, Password: s.opts.Password, ContextTimeoutEnabled: true,
		// Their auto mode races in go-redis v9.23.0 when a client and its
		// Conns connect at once (pkg/redisconn sets the same, and says why).
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if s.CAPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CAPEM)
		o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if s.opts.TLSClientAuth {
			o.TLSConfig.Certificates = []tls.Certificate{s.cert}
		}
	}
	return o
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis-server.log") }

// LogTail returns the last n bytes of the server's log, for a failure
// message; if the log cannot be read, it says why instead.
func (s *Server) LogTail(n int64) string { return proc.FileTail(s.logPath(), n) }

// Pid returns the server's process id.
func (s *Server) Pid() int { return s.p.Pid() }

// Kill stops the server with SIGKILL and waits for it to exit. Its data,
// kept only in memory, is gone.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	if s.p == nil {
		return
	}
	_ = s.p.Kill() // only fails if the signal cannot be sent, as to no process
	s.p = nil
}

// Restart kills the server and starts it again on the same port and
// directory: empty, as a restart without persistence is, or holding the
// snapshot of the last SAVE.
func (s *Server) Restart() error {
	s.kill()
	path, err := exec.LookPath(Program())
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotInstalled, Program())
	}
	return s.launch(path)
}

// Pause stops the server with SIGSTOP: connections stay open, nothing is
// answered. Resume undoes it.
func (s *Server) Pause() error { return s.p.Signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.p.Signal(syscall.SIGCONT) }

// Stop kills the server, paused or not, and removes its directory.
func (s *Server) Stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}
