package redisconn

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// dialer returns the Dialer of the clients Clients builds, which go-redis
// uses for every server they reach: the nodes, the masters and replicas
// Sentinels name, and the Sentinels themselves. It dials TCP as go-redis's
// own dialer does (its keep-alive policy), then, when tlsConf is not nil,
// TLS with it (checking the address's host when tlsConf names no server,
// as tls.Dial does), all within timeout and ctx; and it returns the
// connection with every reply checked against the limits of limitReplies,
// so that no server can make the process allocate more than they allow.
// With check, each connection is made only to an IP check allows (see
// Config.CheckDestination).
func dialer(timeout time.Duration, tlsConf *tls.Config, check func(addr, resolved string) error) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dialTCP := redis.NewDialer(&redis.Options{DialTimeout: timeout})
	if check != nil {
		dialTCP = checkedDialer(timeout, check)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		conn, err := dialTCP(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tlsConf != nil {
			conf := tlsConf
			if conf.ServerName == "" {
				conf = conf.Clone()
				if conf.ServerName, _, err = net.SplitHostPort(addr); err != nil {
					conf.ServerName = addr
				}
			}
			tc := tls.Client(conn, conf)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = conn.Close()
				return nil, err
			}
			conn = tc
		}
		return limitReplies(conn, addr), nil
	}
}
