package controller

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redisconn"
)

// One message per broken rule of -redis-allowed-destinations.
func TestParseDestinationsNamesTheBrokenRule(t *testing.T) {
	cases := []struct{ list, want string }{
		{"10.0.0.1/8", "has host bits set: write the network, 10.0.0.0/8"},
		{"10.0.0.0/33", "is not a CIDR"},
		{"redis_main.example.com", "is neither a CIDR, an IP nor a DNS suffix"},
	}
	for _, c := range cases {
		if _, err := ParseDestinations("10.1.0.0/16, " + c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseDestinations(%q): %v; want an error saying %q", c.list, err, c.want)
		}
	}
	if d, err := ParseDestinations(" , "); d != nil || err != nil {
		t.Errorf("a list of blanks: %v, %v; want nil (anywhere)", d, err)
	}
}

// Each connection is judged by the IP it goes to; a name by its suffix,
// except on the addresses no suffix opens.
func TestDestinationsCheck(t *testing.T) {
	d, err := ParseDestinations("10.20.0.0/16, 2001:db8::/32, 127.0.0.2, .redis.example.com")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		addr, resolved string
		allowed        bool
	}{
		{"10.20.3.4:6379", "10.20.3.4:6379", true},
		{"10.21.3.4:6379", "10.21.3.4:6379", false},
		{"[2001:db8::7]:6379", "[2001:db8::7]:6379", true},
		{"[::ffff:10.20.3.4]:6379", "[::ffff:10.20.3.4]:6379", true},
		{"127.0.0.2:6379", "127.0.0.2:6379", true},
		{"127.0.0.1:6379", "127.0.0.1:6379", false},
		// A name in the network is allowed by the IP it resolved to.
		{"db.shop.svc:6379", "10.20.0.9:6379", true},
		{"db.shop.svc:6379", "10.30.0.9:6379", false},
		// A name under the suffix, wherever it resolved to...
		{"a.redis.example.com:6379", "192.0.2.7:6379", true},
		{"REDIS.EXAMPLE.COM.:6379", "192.0.2.7:6379", true},
		{"evilredis.example.com:6379", "192.0.2.7:6379", false},
		// ... but a loopback, link-local or unspecified IP.
		{"a.redis.example.com:6379", "127.0.0.1:6379", false},
		{"a.redis.example.com:80", "169.254.169.254:80", false},
		{"a.redis.example.com:6379", "0.0.0.0:6379", false},
		{"a.redis.example.com:6379", "127.0.0.2:6379", true}, // listed
		// An IP is no name.
		{"192.0.2.7:6379", "192.0.2.7:6379", false},
	}
	for _, c := range cases {
		err := d.Check(c.addr, c.resolved)
		if got := err == nil; got != c.allowed {
			t.Errorf("Check(%s via %s) = %v; want allowed %v", c.addr, c.resolved, err, c.allowed)
		}
		if err != nil && !errors.Is(err, ErrDestinationNotAllowed) {
			t.Errorf("Check(%s via %s) = %v; want it to wrap ErrDestinationNotAllowed", c.addr, c.resolved, err)
		}
	}
}

// Against a real redis-server listening on two loopback addresses: the
// clients of a Config reach it on the listed one, and fail on the other
// before connecting, with ErrDestinationNotAllowed, which the status names
// DestinationNotAllowed.
func TestDestinationsRefuseADialToAnAddressOutsideTheList(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Args: []string{"--bind", "127.0.0.1", "127.0.0.2"}})
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDestinations("127.0.0.2/32,localhost")
	if err != nil {
		t.Fatal(err)
	}
	ping := func(addr string) error {
		cfg := redisconn.Config{Addrs: []string{addr}, NodeTimeout: 2 * time.Second, CheckDestination: d.Check}
		c := cfg.Clients()[0]
		defer func() { _ = c.Close() }()
		return c.Ping(context.Background()).Err()
	}
	if err := ping(net.JoinHostPort("127.0.0.2", port)); err != nil {
		t.Fatalf("the listed address: %v; want PONG", err)
	}
	// 127.0.0.1 is outside the list; localhost is a listed name, but
	// resolves to a loopback address no CIDR lists.
	for _, addr := range []string{s.Addr, net.JoinHostPort("localhost", port)} {
		err := ping(addr)
		if !errors.Is(err, ErrDestinationNotAllowed) || classify(err) != ReasonDestinationNotAllowed {
			t.Errorf("%s: %v (%s); want it refused, %s", addr, err, classify(err), ReasonDestinationNotAllowed)
		}
	}
	// Without the check, the same Config reaches the server there.
	cfg := redisconn.Config{Addrs: []string{s.Addr}, NodeTimeout: 2 * time.Second}
	c := cfg.Clients()[0]
	defer func() { _ = c.Close() }()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("%s without the check: %v", s.Addr, err)
	}
}
