package controller

// Why a lock's Redis could not be used, told in a fixed vocabulary.
//
// A RedisLock may name any address, the controller dials it from its own
// network position, and the lock's author reads its status and events. So
// the controller never copies into them text that the network or a server
// produced: a service's banner, an HTTP status line, the names in a
// certificate, a resolver's address, an error reply, even which of
// "refused" and "timed out" a dial met. It tells the reason of one fault
// below and that reason's one message; the error itself goes to the
// controller's own log. Messages the controller composes from the spec
// (an invalid field, a missing Secret: names the user wrote) are shown as
// they are: see describe.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// Reasons of the faults of a node, as condition reasons.
const (
	// ReasonUnreachable: no answer. A refused connection, a reset, a
	// closed connection, an unroutable address and a timeout are one
	// reason with one message, so that the status is no port scanner:
	// refused (a live host, a closed port) against timed out (no host, a
	// filter) would map a network the tenant cannot reach. Only the log
	// tells them apart.
	ReasonUnreachable           = "Unreachable"
	ReasonNameNotResolved       = "NameNotResolved"
	ReasonDestinationNotAllowed = "DestinationNotAllowed"
	ReasonNotRedis              = "NotRedis"
	ReasonReplyTooLarge         = "ReplyTooLarge"
	ReasonTLSVerificationFailed = "TLSVerificationFailed"
	ReasonTLSHandshakeFailed    = "TLSHandshakeFailed"
	ReasonAuthenticationFailed  = "AuthenticationFailed"
	ReasonNotPermitted          = "NotPermitted"
	ReasonReadOnlyReplica       = "ReadOnlyReplica"
	ReasonOutOfMemory           = "OutOfMemory"
	ReasonRedisUnavailable      = "RedisUnavailable"
	ReasonRedisError            = "RedisError"
	ReasonReplicationShortfall  = "ReplicationShortfall"
	ReasonNoScripting           = "NoScripting"
)

// faultMessages is the vocabulary: the one message of each reason of a
// fault, in conditions, status.nodes[].message and events.
var faultMessages = map[string]string{
	ReasonUnreachable:           "no answer from a server: it is down, the address or port is wrong, or the network does not let the controller through (the controller's log says which)",
	ReasonNameNotResolved:       "the host name did not resolve (DNS)",
	ReasonDestinationNotAllowed: "the controller may not connect there: the address is outside its -redis-allowed-destinations",
	ReasonNotRedis:              "what answers there is not a Redis server: its reply is not Redis's protocol (RESP)",
	ReasonReplyTooLarge:         "the server sent a reply larger than the controller reads",
	ReasonTLSVerificationFailed: "the server's TLS certificate did not verify: it is not signed by the CA of tls.caSecretRef, or does not name the address (tls.serverName)",
	ReasonTLSHandshakeFailed:    "the TLS handshake failed: the server does not speak TLS, or did not accept the controller's (a client certificate it requires: tls.certSecretRef)",
	ReasonAuthenticationFailed:  "Redis did not accept the credentials (NOAUTH or WRONGPASS): check passwordSecretRef and usernameSecretRef",
	ReasonNotPermitted:          "the Redis user may not run a command the lock needs (NOPERM): grant it the lock's commands and keys",
	ReasonReadOnlyReplica:       "the node is a read-only replica (READONLY): name its master",
	ReasonOutOfMemory:           "Redis would not take the write: it is out of memory (OOM, maxmemory)",
	ReasonRedisUnavailable:      "Redis cannot serve now: it is loading its data, busy with a script, full of clients, or its master, replicas or cluster are down",
	ReasonRedisError:            "Redis answered with an error reply (the controller's log has its text)",
	ReasonReplicationShortfall:  "the node's replicas did not acknowledge the write within nodeTimeout (waitReplicas)",
	ReasonNoScripting:           "the server runs no Lua scripts (EVAL, EVALSHA), which every lock operation needs: a build without Lua, or the commands renamed or denied",
	ReasonMalformedValue:        "the lock key holds a value this controller did not write; it is never overwritten: delete the key if it is stale",
	ReasonNoQuorum:              "too few nodes answered to decide",
	ReasonUnknown:               "an unexpected error (the controller's log has it)",
}

// faultMessage returns the message of reason.
func faultMessage(reason string) string {
	if m, ok := faultMessages[reason]; ok {
		return m
	}
	return faultMessages[ReasonUnknown]
}

// classify names the fault of err, an error of a call to one Redis node,
// with a reason of faultMessages; ReasonUnknown for anything it does not
// recognise, never a reason whose message would carry err's text.
func classify(err error) string {
	var rerr redis.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrDestinationNotAllowed):
		return ReasonDestinationNotAllowed
	case errors.Is(err, redisconn.ErrReplyTooLarge):
		return ReasonReplyTooLarge
	case errors.Is(err, redisconn.ErrNotRedis), anyLeaf(err, isParseError):
		return ReasonNotRedis
	case errors.Is(err, redislock.ErrReplication):
		return ReasonReplicationShortfall
	case errors.Is(err, redislock.ErrNoScripting):
		return ReasonNoScripting
	case errors.Is(err, redislock.ErrMalformedValue):
		return ReasonMalformedValue
	case isCertificateError(err):
		return ReasonTLSVerificationFailed
	case isHandshakeError(err):
		return ReasonTLSHandshakeFailed
	case errors.As(err, &rerr) && !errors.Is(err, redis.Nil):
		return redisErrorReason(rerr)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return ReasonNameNotResolved
	}
	if isUnreachable(err) {
		return ReasonUnreachable
	}
	return ReasonUnknown
}

// redisErrorReason names the fault of an error reply by its code (the
// reply's first word), never by the rest of its text.
func redisErrorReason(rerr redis.Error) string {
	s := rerr.Error()
	switch {
	case redis.IsAuthError(rerr), isLegacyAuthError(s):
		return ReasonAuthenticationFailed
	case redis.IsPermissionError(rerr):
		return ReasonNotPermitted
	case redis.IsReadOnlyError(rerr):
		return ReasonReadOnlyReplica
	case redis.IsOOMError(rerr):
		return ReasonOutOfMemory
	case redis.IsLoadingError(rerr), redis.IsMasterDownError(rerr), redis.IsClusterDownError(rerr),
		redis.IsTryAgainError(rerr), redis.IsNoReplicasError(rerr), redis.IsMaxClientsError(rerr),
		strings.HasPrefix(s, "BUSY "):
		return ReasonRedisUnavailable
	}
	return ReasonRedisError
}

// isLegacyAuthError reports the AUTH refusals of servers without ACLs
// (before Redis 6), which come as ERR replies.
func isLegacyAuthError(s string) bool {
	return strings.HasPrefix(s, "ERR invalid password") || strings.HasPrefix(s, "ERR Client sent AUTH") ||
		strings.HasPrefix(s, "ERR AUTH ")
}

// parseErrorPrefixes begin the errors of go-redis's reply parser
// (internal/proto/reader.go), which has no sentinel for them: a reply it
// cannot parse, or of another type than the command's, came from
// something that is not a Redis server (redisconn's framing check catches
// most such replies first, as ErrNotRedis).
var parseErrorPrefixes = []string{
	"redis: can't ", "redis: invalid reply", "redis: invalid line", "redis: got ", "redis: RESP3 ",
	"redis: the length of the array", "redis: empty push", "redis: negative push", "redis: buffer too small",
}

func isParseError(err error) bool {
	s := err.Error()
	for _, p := range parseErrorPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// anyLeaf reports whether f holds for an error in err's tree that wraps
// none.
func anyLeaf(err error, f func(error) bool) bool {
	switch e := err.(type) { //nolint:errorlint // walks err's tree itself, down to its leaves
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return anyLeaf(inner, f)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if anyLeaf(inner, f) {
				return true
			}
		}
		return false
	}
	return f(err)
}

// isCertificateError reports a server certificate that did not verify.
func isCertificateError(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &host) || errors.As(err, &invalid)
}

// isHandshakeError reports a TLS handshake that failed otherwise: the
// server is no TLS server, or sent an alert.
func isHandshakeError(err error) bool {
	var (
		header tls.RecordHeaderError
		alert  tls.AlertError
		op     *net.OpError
	)
	return errors.As(err, &header) || errors.As(err, &alert) || (errors.As(err, &op) && op.Op == "remote error")
}

// isUnreachable reports a connection that could not be made or did not
// last: refused, reset, closed, unroutable, or timed out.
func isUnreachable(err error) bool {
	for _, target := range []error{
		context.DeadlineExceeded, os.ErrDeadlineExceeded, redis.ErrPoolTimeout, io.EOF, io.ErrUnexpectedEOF,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var (
		netErr net.Error
		op     *net.OpError
	)
	return (errors.As(err, &netErr) && netErr.Timeout()) || errors.As(err, &op)
}

// composedReasons are the reasons whose errors the controller composes
// itself, from the spec and the objects it names: their text is the
// user's own, and says which field to fix.
var composedReasons = map[string]bool{
	ReasonInvalidSpec: true, ReasonSecretNotFound: true, ReasonConnectionNotFound: true,
	ReasonForbidden: true, ReasonInlineRedisForbidden: true,
}

// describe returns the condition reason of err and the message to show
// for it: err's own text for a composed reason, else the reason's fixed
// message.
func describe(err error) (reason, message string) {
	reason = reasonFor(err)
	if composedReasons[reason] {
		return reason, err.Error()
	}
	return reason, faultMessage(reason)
}
