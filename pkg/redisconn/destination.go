package redisconn

import (
	"context"
	"net"
	"syscall"
	"time"
)

// checkedDialer returns a TCP dialer that dials as go-redis's own does
// (timeout, and its keep-alive policy) and asks check, before each
// connection is made, whether it may go to the IP the address resolved to
// for this very dial (Config.CheckDestination): a refusal fails the dial
// before a packet leaves, so the answer never depends on what listens
// there, and there is no second lookup for DNS to answer otherwise.
func checkedDialer(timeout time.Duration, check func(addr, resolved string) error) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{
			Timeout: timeout,
			// go-redis's defaultKeepAliveConfig, which its NewDialer uses.
			KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3},
			Control: func(_, resolved string, _ syscall.RawConn) error {
				return check(addr, resolved)
			},
		}
		return d.DialContext(ctx, network, addr)
	}
}
