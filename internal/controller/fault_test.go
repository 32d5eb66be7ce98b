package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// errorReply is an error reply as go-redis returns one (a redis.Error),
// for the codes a test cannot make a real server send on demand.
type errorReply string

func (e errorReply) Error() string { return string(e) }
func (errorReply) RedisError()     {}

// nodeErr wraps err as the lock engine names a node's error.
func nodeErr(err error) error { return fmt.Errorf("node 0 (10.0.0.7:6379): %w", err) }

// dialErr is a dial's error as the net package returns it.
func dialErr(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 22}, Err: err}
}

// Each fault is told by its reason, whatever server text its error
// carries: one case per reason of the vocabulary, and the shapes the
// errors of one reason come in.
func TestClassifyNamesOneReasonPerFault(t *testing.T) {
	const secret = "db-admin.vault.internal"
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"refused", dialErr(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), ReasonUnreachable},
		{"dial timed out", dialErr(&timeoutError{}), ReasonUnreachable},
		{"no answer within nodeTimeout", fmt.Errorf("node 0: no answer within 200ms: %w", context.DeadlineExceeded), ReasonUnreachable},
		{"read deadline", nodeErr(os.ErrDeadlineExceeded), ReasonUnreachable},
		{"closed by the server", nodeErr(io.EOF), ReasonUnreachable},
		{"reset", nodeErr(&net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}), ReasonUnreachable},
		{"no route", dialErr(&os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}), ReasonUnreachable},
		{"pool timeout", nodeErr(redis.ErrPoolTimeout), ReasonUnreachable},
		{"name not found", dialErr(&net.DNSError{Err: "no such host", Name: secret, Server: "10.96.0.10:53", IsNotFound: true}), ReasonNameNotResolved},
		{"resolver timed out", dialErr(&net.DNSError{Err: "i/o timeout", Name: secret, Server: "10.96.0.10:53", IsTimeout: true}), ReasonNameNotResolved},
		{"destination not allowed", dialErr(fmt.Errorf("%w: %s", ErrDestinationNotAllowed, secret)), ReasonDestinationNotAllowed},
		{"not RESP, by the framing check", nodeErr(fmt.Errorf("%w: 10.0.0.7:22: 'S' is no RESP type", redisconn.ErrNotRedis)), ReasonNotRedis},
		{"not RESP, by go-redis's parser", nodeErr(errors.New(`redis: can't parse map reply: "SSH-2.0-OpenSSH_9.6"`)), ReasonNotRedis},
		{"an HTTP server", nodeErr(errors.New(`redis: invalid reply: "HTTP/1.1 400 Bad Request"`)), ReasonNotRedis},
		{"reply too large", nodeErr(fmt.Errorf("%w: 10.0.0.7:6379: bulk string of 9999999 bytes", redisconn.ErrReplyTooLarge)), ReasonReplyTooLarge},
		{"certificate of another name", nodeErr(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{secret}}, Host: "10.0.0.7"}}), ReasonTLSVerificationFailed},
		{"certificate of an unknown CA", nodeErr(x509.UnknownAuthorityError{}), ReasonTLSVerificationFailed},
		{"no TLS server", nodeErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), ReasonTLSHandshakeFailed},
		{"a TLS alert", nodeErr(&net.OpError{Op: "remote error", Err: tls.AlertError(116)}), ReasonTLSHandshakeFailed},
		{"WRONGPASS", nodeErr(errorReply("WRONGPASS invalid username-password pair or user is disabled.")), ReasonAuthenticationFailed},
		{"NOAUTH", nodeErr(errorReply("NOAUTH Authentication required.")), ReasonAuthenticationFailed},
		{"AUTH before ACLs", nodeErr(errorReply("ERR invalid password")), ReasonAuthenticationFailed},
		{"NOPERM", nodeErr(errorReply("NOPERM User lock has no permissions to run the 'evalsha' command")), ReasonNotPermitted},
		{"READONLY", nodeErr(errorReply("READONLY You can't write against a read only replica.")), ReasonReadOnlyReplica},
		{"OOM", nodeErr(errorReply("OOM command not allowed when used memory > 'maxmemory'.")), ReasonOutOfMemory},
		{"LOADING", nodeErr(errorReply("LOADING Redis is loading the dataset in memory")), ReasonRedisUnavailable},
		{"BUSY", nodeErr(errorReply("BUSY Redis is busy running a script.")), ReasonRedisUnavailable},
		{"CLUSTERDOWN", nodeErr(errorReply("CLUSTERDOWN The cluster is down")), ReasonRedisUnavailable},
		{"another error reply", nodeErr(errorReply("ERR internal host " + secret)), ReasonRedisError},
		{"replicas short", nodeErr(fmt.Errorf("%w: 0 of the 1 replicas acknowledged the write within 100ms", redislock.ErrReplication)), ReasonReplicationShortfall},
		{"no Lua", nodeErr(fmt.Errorf("%w: %w", redislock.ErrNoScripting, errorReply("ERR unknown command 'evalsha', with args beginning with: "))), ReasonNoScripting},
		{"a value not ours", fmt.Errorf("%w: want prefix %q", redislock.ErrMalformedValue, "v1:"), ReasonMalformedValue},
		{"too few nodes", fmt.Errorf("inspect: 0 of 1 nodes answered: %w: %w", redislock.ErrNoQuorum, nodeErr(io.EOF)), ReasonNoQuorum},
		{"anything else", errors.New("the server said " + secret), ReasonUnknown},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, msg := describe(c.err)
			if reason != c.want {
				t.Errorf("reason %s; want %s (error %q)", reason, c.want, c.err)
			}
			if msg != faultMessages[c.want] {
				t.Errorf("message %q; want the vocabulary's %q", msg, faultMessages[c.want])
			}
			if strings.Contains(msg, secret) || strings.Contains(msg, "SSH") || strings.Contains(msg, "HTTP") {
				t.Errorf("message %q carries the error's text", msg)
			}
		})
		covered[c.want] = true
	}
	for reason := range faultMessages {
		if !covered[reason] {
			t.Errorf("no case for reason %s", reason)
		}
	}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

// The reasons the controller composes from the spec keep their message:
// it names the user's own fields and objects.
func TestDescribeKeepsComposedMessages(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: spec.redis.passwordSecretRef: Secret shop/redis-auth not found", redisconn.ErrSecret),
		fmt.Errorf("%w: spec.ttl: \"1d\"", redisconn.ErrInvalidSpec),
		inlineRedisError{},
	} {
		if _, msg := describe(err); msg != err.Error() {
			t.Errorf("message %q; want the error's own, %q", msg, err)
		}
	}
	if reason, _ := describe(inlineRedisError{}); reason != ReasonInlineRedisForbidden {
		t.Errorf("inline spec.redis refused with reason %s; want %s", reason, ReasonInlineRedisForbidden)
	}
}
