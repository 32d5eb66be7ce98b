package proc

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
)

// recentPorts is how many of its latest ports FreePort remembers. A port
// is at risk from the moment FreePort frees it until its process listens
// on it; the kernel offers a listened-on port to no one, so only the
// latest few need remembering. A long test process that remembered all of
// them would run out: bind offers only about half the ephemeral range.
const recentPorts = 1024

// handedOut are the latest recentPorts ports FreePort returned in this
// process, oldest first: the kernel hands a port it just freed out again,
// so two calls in a row (a Cluster node's port and its bus port) could
// get the same one.
var handedOut struct {
	sync.Mutex
	ports []int
}

// errAllHandedOut is FreePort's error when the kernel offers only ports it
// returned lately.
var errAllHandedOut = errors.New("every port offered was handed out lately")

// FreePort returns a loopback TCP port that nothing listened on a moment
// ago, for a child process to listen on, and that none of the latest
// recentPorts calls in this process returned. Another process may take it
// in between; on one test machine that is rare enough.
func FreePort() (port int, err error) {
	// A port handed out lately stays listened on until the search ends,
	// so that the kernel offers another one next.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			if cerr := l.Close(); cerr != nil && err == nil {
				port, err = 0, fmt.Errorf("proc: find a free port: %w", cerr)
			}
		}
	}()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("proc: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !remember(port) {
			held = append(held, l)
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("proc: find a free port: %w", err)
		}
		return port, nil
	}
	return 0, fmt.Errorf("proc: find a free port: %w in 100 tries", errAllHandedOut)
}

// remember adds port to the latest ports handed out and says whether it
// was not among them.
func remember(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if slices.Contains(handedOut.ports, port) {
		return false
	}
	if len(handedOut.ports) == recentPorts {
		handedOut.ports = slices.Delete(handedOut.ports, 0, 1)
	}
	handedOut.ports = append(handedOut.ports, port)
	return true
}
