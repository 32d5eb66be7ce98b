// Package hostile runs servers that a hostile tenant could point a
// RedisLock at, for the tests that prove what such a server can cost the
// controller, the agent and the plugin: one that accepts and never answers,
// one that answers every request with the same bytes, one that answers with
// a script of its own.
//
// What is guaranteed: a Server listens on a free loopback port for the
// length of the test that started it, and t.Cleanup closes its listener and
// every connection it accepted; each connection's goroutine ends then.
package hostile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is a TCP server on loopback that runs Handle on each connection.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string

	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// Accepted counts the connections accepted so far; under mu.
	accepted int
}

// Handler serves one accepted connection until it returns or the
// connection is closed (then every read and write fails).
type Handler func(c net.Conn)

// Start listens on a free loopback port and serves each connection with h.
func Start(t testing.TB, h Handler) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hostile: listen: %v", err)
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve(h)
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(h Handler) {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.accepted++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			h(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// Accepted returns how many connections the server has accepted.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Close stops listening, closes every open connection and waits for their
// handlers to return.
func (s *Server) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
}

// BlackHole reads and discards whatever the client sends and never
// answers: a server that "accepts connections and never answers".
func BlackHole(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// Reply answers each read of the client's bytes with reply, whatever was
// asked: reply is written once per read that returns data.
func Reply(reply []byte) Handler {
	return func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}

// Banner writes banner once on accept, as an SSH or SMTP server does, then
// reads and discards.
func Banner(banner []byte) Handler {
	return func(c net.Conn) {
		if _, err := c.Write(banner); err != nil && !errors.Is(err, net.ErrClosed) {
			return
		}
		BlackHole(c)
	}
}

// EachCommand reads the client's commands (RESP arrays of bulk strings,
// as every Redis client sends them) and answers each with answer(args),
// so that a client that pipelines its handshake gets a reply per command.
// A read that is not such a command ends the connection.
func EachCommand(answer func(args []string) []byte) Handler {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			args, err := readCommand(r)
			if err != nil {
				return
			}
			if _, err := c.Write(answer(args)); err != nil {
				return
			}
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, min(n, 64))
	for range n {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:size]))
	}
	return args, nil
}

// readHeader reads a line "<kind><number>\r\n" and returns the number,
// at most 1<<20.
func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if len(line) < 2 || line[0] != kind {
		return 0, fmt.Errorf("hostile: want %q, read %q", kind, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("hostile: bad length in %q", line)
	}
	return n, nil
}
