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
// one of its latest recentPorts again (a Cluster node's port and bus port
// once came out equal, and the node could not start). The old FreePort
// repeated one within about 200 calls.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range recentPorts {
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
