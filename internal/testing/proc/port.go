package proc

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// handedOut are the ports FreePort returned in this process: the kernel
// hands a port it just freed out again, so two calls in a row (a Cluster
// node's port and its bus port) could get the same one.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// errAllHandedOut is FreePort's error when the kernel offers only ports it
// returned before.
var errAllHandedOut = errors.New("every port offered was handed out before")

// FreePort returns a loopback TCP port that nothing listened on a moment
// ago, for a child process to listen on, and that no earlier call in this
// process returned. Another process may take it in between; on one test
// machine that is rare enough.
func FreePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("proc: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("proc: find a free port: %w", err)
		}
		handedOut.Lock()
		seen := handedOut.ports[port]
		if !seen {
			if handedOut.ports == nil {
				handedOut.ports = map[int]bool{}
			}
			handedOut.ports[port] = true
		}
		handedOut.Unlock()
		if !seen {
			return port, nil
		}
	}
	return 0, fmt.Errorf("proc: find a free port: %w in 100 tries", errAllHandedOut)
}
