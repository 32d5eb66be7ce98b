package proc

import (
	"fmt"
	"net"
)

// FreePort returns a loopback TCP port that nothing listened on a moment
// ago, for a child process to listen on. Another process may take it in
// between; on one test machine that is rare enough.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("proc: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("proc: find a free port: %w", err)
	}
	return port, nil
}
