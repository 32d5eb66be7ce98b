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
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redisproc: redis-server not found on PATH; run 'make test' (it installs it as root) or apt-get install redis-server")

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
	opts  Options
	dir   string
	cmd   *exec.Cmd
	// exit is closed when the process has exited, with its status in
	// exitErr.
	exit    chan struct{}
	exitErr error
}

// Start launches a server on a free loopback port and waits until it
// answers PING.
func Start(opts Options) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), opts: opts, dir: dir}
	if opts.TLS {
		if s.CAPEM, err = writeTLSFiles(dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
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
		args = append(args, "--port", "0", "--tls-port", port,
			"--tls-cert-file", filepath.Join(s.dir, "cert.pem"), "--tls-key-file", filepath.Join(s.dir, "key.pem"),
			"--tls-ca-cert-file", filepath.Join(s.dir, "ca.pem"), "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", port)
	}
	args = append(args,
		"--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "no", "--loglevel", "warning",
	)
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: start redis-server: %w", err)
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() {
		s.exitErr = cmd.Wait()
		close(s.exit)
	}()
	return s.waitReady()
}

func (s *Server) waitReady() error {
	o := s.ClientOptions()
	o.MaxRetries = -1
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.exit:
			return fmt.Errorf("redisproc: redis-server on %s exited at start: %w", s.Addr, s.exitErr)
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("redisproc: redis-server on %s not ready after %v: %w", s.Addr, startTimeout, err)
		case <-tick.C:
		}
	}
}

// Client returns a new client for the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(s.ClientOptions())
}

// ClientOptions returns client options for the server, with timeouts that
// follow the caller's context.
func (s *Server) ClientOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr, Password: s.opts.Password, ContextTimeoutEnabled: true}
	if s.CAPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CAPEM)
		o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return o
}

// Pid returns the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill stops the server with SIGKILL and waits for it to exit. Its data,
// kept only in memory, is gone.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port, empty,
// as a restart without persistence does.
func (s *Server) Restart() error {
	s.kill()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return ErrNotInstalled
	}
	return s.launch(path)
}

// Pause stops the server with SIGSTOP: connections stay open, nothing is
// answered. Resume undoes it.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.kill()
	_ = os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
