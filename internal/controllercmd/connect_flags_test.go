package controllercmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/redislock/redislock/internal/controller"
)

// -allow-inline-redis and -redis-allowed-destinations become the
// reconciler's ConnectPolicy; a destination that does not parse is a
// usage error naming the flag, before anything connects.
func TestConnectPolicyFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.connectPolicy.ForbidInlineRedis || c.connectPolicy.Destinations != nil {
		t.Errorf("by default %+v; want anything allowed", c.connectPolicy)
	}
	c, err = parseFlags([]string{"-allow-inline-redis=false", "-redis-allowed-destinations=10.20.0.0/16, redis.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.connectPolicy.ForbidInlineRedis {
		t.Error("-allow-inline-redis=false: inline spec.redis still allowed")
	}
	if d := c.connectPolicy.Destinations; d == nil || d.String() != "10.20.0.0/16,redis.example.com" {
		t.Errorf("-redis-allowed-destinations: %v; want 10.20.0.0/16,redis.example.com", d)
	}
	if err := c.connectPolicy.Destinations.Check("10.21.0.1:6379", "10.21.0.1:6379"); !errors.Is(err, controller.ErrDestinationNotAllowed) {
		t.Errorf("an address outside the list: %v; want it refused", err)
	}
	_, err = parseFlags([]string{"-redis-allowed-destinations=10.20.0.1/16"})
	if err == nil || !strings.Contains(err.Error(), `controller: -redis-allowed-destinations: "10.20.0.1/16" has host bits set`) {
		t.Errorf("a CIDR with host bits: %v; want a usage error naming the flag", err)
	}
}
