package proc

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortCanBeListenedOn(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	_ = l.Close()
}

// The kernel offers a port it just freed again; FreePort never returns
// one twice in a process (a Cluster node's port and bus port once came
// out equal, and the node could not start).
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("FreePort returned %d twice in %d calls", port, len(seen)+1)
		}
		seen[port] = true
	}
}
