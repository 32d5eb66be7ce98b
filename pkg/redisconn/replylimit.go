package redisconn

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Sentinel errors of the clients Clients returns, wrapped in the error of
// the call whose reply broke the rule (errors.Is finds them through the
// lock engine's ErrNoQuorum too). The connection is dropped; the next call
// dials again.
var (
	// ErrReplyTooLarge means a server sent a reply over one of the limits
	// below, before go-redis allocated anything for it. The message names
	// the server and the limit.
	ErrReplyTooLarge = errors.New("redisconn: reply too large")
	// ErrNotRedis means a server sent bytes that are not RESP framing (an
	// unknown type byte, a length that is not a number, a line not ended
	// by CRLF): whatever answers there is not a Redis server.
	ErrNotRedis = errors.New("redisconn: not a Redis server")
)

// The limits on one reply. A RedisLock may name any server, so the
// process reading it (the controller, shared by every tenant) must not
// take the server's word for how much to allocate: go-redis makes a
// buffer of whatever length a bulk string's header declares and a slice
// or map of whatever count an aggregate's declares, before a byte of
// either arrives, and recurses once per level of nesting. Each limit is
// far above what this project reads (lock values under 300 bytes,
// metadata at most redislock.MaxMetadataLen = 4 KiB, INFO sections of a
// few KiB, CLUSTER SLOTS of a Cluster cut into all 16384 single-slot
// ranges, each with a master and a replica, about 5 MiB as maxReply
// counts it, 7 MiB with two replicas), and far below a 256 MiB container: for one reply within
// them go-redis allocates about 3 times maxReply at most (for its worst
// shape, a map of empty strings, whose bytes the server must send; a nest
// of aggregate headers, the cheapest to send, costs it 1 time), and a
// connection reads one reply at a time.
const (
	// maxBulk bounds a bulk string, blob error or verbatim string.
	maxBulk = 512 << 10
	// maxElements bounds the elements of an array, set, push, map or
	// attribute; a map or attribute of n entries has 2n.
	maxElements = 64 << 10
	// maxDepth bounds the aggregates open at once, the outermost
	// included; the deepest reply this project reads (CLUSTER SLOTS)
	// nests 3.
	maxDepth = 16
	// maxLine bounds a line without its CRLF: a simple string, an error,
	// a number, a header.
	maxLine = 64 << 10
	// maxReply bounds what one top-level reply counts: the bytes of its
	// lines and of the bulk strings it declares, and elementCost for each
	// element its aggregates declare. Without it a nest of *65536 headers
	// would make go-redis allocate 1 MiB for every 9 bytes sent.
	maxReply = 8 << 20
	// elementCost is what an aggregate element counts: the interface
	// value go-redis allocates for it.
	elementCost = 16
)

// limitReplies returns conn with every byte it reads checked, in order,
// as framing of RESP2 and RESP3 replies within the limits above. The Read
// that brings a byte past a limit, or not RESP, returns no bytes and an
// error wrapping ErrReplyTooLarge or ErrNotRedis that names addr (the
// server's), and so does every Read after it: go-redis, which reads
// only what Read returns, never sees the header that breaks a limit, and
// drops the connection on the error. Only reading changes.
//
// go-redis's pool peeks at the socket of an idle connection, without
// reading it, to drop one the server has closed: the returned connection
// still shows the socket (SyscallConn, or NetConn as tls.Conn does).
func limitReplies(conn net.Conn, addr string) net.Conn {
	c := &limitConn{Conn: conn, f: framer{addr: addr}}
	if sc, ok := conn.(syscall.Conn); ok {
		return &limitSyscallConn{c, sc}
	}
	return c
}

type limitConn struct {
	net.Conn
	f   framer
	err error // the first limit broken
}

func (c *limitConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if c.err = c.f.check(p[:n]); c.err != nil {
		return 0, c.err
	}
	return n, err
}

// NetConn returns the connection read from.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// limitSyscallConn is a limitConn over a socket of its own (TCP, not TLS).
type limitSyscallConn struct {
	*limitConn
	syscall.Conn
}

// framer follows the framing of a stream of replies, a chunk at a time,
// keeping no more than its position: what the next byte must be, and how
// many elements each open aggregate still has to come.
type framer struct {
	addr  string
	state framerState
	kind  byte  // the type byte of the line being read
	line  int   // bytes of that line so far, after the type byte
	cr    bool  // its last byte so far is '\r'
	n     int64 // a header's number so far
	neg   bool  // and it began with '-'
	dig   int   // and how many digits it has
	bulk  int64 // payload bytes to come before "\r\n"
	depth int   // open aggregates
	// left is how many elements each open aggregate, outermost first,
	// still has to come; attr marks attributes, which are no element of
	// the aggregate around them.
	left  [maxDepth]int64
	attr  [maxDepth]bool
	spent int64 // what the top-level reply being read counts so far
}

type framerState uint8

const (
	atType   framerState = iota // the next byte starts an element
	inLine                      // in a line, up to its '\n'
	inBulk                      // in a bulk string's payload
	atBulkCR                    // at the '\r' after a payload
	atBulkLF                    // at the '\n' after a payload
)

// maxDigits is the longest length read: any longer is over every limit.
const maxDigits = 18

// check reads p, the next bytes of the stream, and returns the error of
// the first byte that breaks a limit or is not RESP; nil if none does.
func (f *framer) check(p []byte) error {
	for i := 0; i < len(p); {
		switch f.state {
		case inBulk:
			k := min(int64(len(p)-i), f.bulk)
			i += int(k)
			if f.bulk -= k; f.bulk == 0 {
				f.state = atBulkCR
			}
			continue
		case atBulkCR:
			if p[i] != '\r' {
				return f.notRedis("%s payload not followed by \\r\\n", kindName(f.kind))
			}
			f.state = atBulkLF
		case atBulkLF:
			if p[i] != '\n' {
				return f.notRedis("%s payload not followed by \\r\\n", kindName(f.kind))
			}
			f.state = atType
			f.done()
		case atType:
			if kindName(p[i]) == "" {
				return f.notRedis("%q is no RESP type", p[i])
			}
			f.kind, f.line, f.cr, f.n, f.neg, f.dig, f.state = p[i], 0, false, 0, false, 0, inLine
		case inLine:
			end := len(p)
			if j := bytes.IndexByte(p[i:], '\n'); j >= 0 {
				end = i + j
			}
			if err := f.lineBytes(p[i:end]); err != nil {
				return err
			}
			if i = end; i == len(p) {
				continue
			}
			if !f.cr {
				return f.notRedis("line ended by \\n alone, not \\r\\n")
			}
			f.state = atType
			if err := f.endLine(); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

// lineBytes reads b, the next bytes of a line before its '\n'.
func (f *framer) lineBytes(b []byte) error {
	if f.line += len(b); f.line > maxLine+1 { // +1 for the '\r'
		return f.tooLarge("line longer than the %d-byte limit", maxLine)
	}
	if !isHeader(f.kind) {
		if len(b) > 0 {
			f.cr = b[len(b)-1] == '\r'
		}
		return nil
	}
	for j, c := range b {
		switch {
		case f.cr:
			return f.notRedis("%s header holds \\r before its end", kindName(f.kind))
		case c == '\r':
			f.cr = true
		case c == '-' && f.line-len(b)+j == 0:
			f.neg = true
		case c == '?' && f.line-len(b)+j == 0:
			return f.notRedis("streamed %s (length ?) is not supported", kindName(f.kind))
		case c < '0' || c > '9':
			return f.notRedis("%s length holds %q, not a digit", kindName(f.kind), c)
		case f.dig == maxDigits:
			limit, unit := limitOf(f.kind)
			return f.tooLarge("%s length of over %d digits exceeds the %d-%s limit", kindName(f.kind), maxDigits, limit, unit)
		default:
			f.n, f.dig = f.n*10+int64(c-'0'), f.dig+1
		}
	}
	return nil
}

// endLine acts on the line just ended: an element, or a header that
// opens one.
func (f *framer) endLine() error {
	if !isHeader(f.kind) {
		if err := f.spend(int64(f.line - 1)); err != nil {
			return err
		}
		f.done()
		return nil
	}
	name := kindName(f.kind)
	switch {
	case f.dig == 0:
		return f.notRedis("%s header without a length", name)
	case f.neg && f.n == 1: // null
		f.done()
		return nil
	case f.neg:
		return f.notRedis("%s length -%d is negative", name, f.n)
	}
	if isBulk(f.kind) {
		if f.n > maxBulk {
			return f.tooLarge("%s of %d bytes exceeds the %d-byte limit", name, f.n, maxBulk)
		}
		f.bulk, f.state = f.n, inBulk
		if f.n == 0 {
			f.state = atBulkCR
		}
		return f.spend(f.n)
	}
	elems, attr := f.n, f.kind == '|'
	if f.kind == '%' || attr {
		elems *= 2
		if elems > maxElements {
			return f.tooLarge("%s of %d entries (%d elements) exceeds the %d-element limit", name, f.n, elems, maxElements)
		}
	} else if elems > maxElements {
		return f.tooLarge("%s of %d elements exceeds the %d-element limit", name, elems, maxElements)
	}
	if f.depth == maxDepth {
		return f.tooLarge("%s nested %d deep exceeds the depth limit of %d", name, maxDepth+1, maxDepth)
	}
	if err := f.spend(elems * elementCost); err != nil {
		return err
	}
	switch {
	case elems > 0:
		f.left[f.depth], f.attr[f.depth] = elems, attr
		f.depth++
	case !attr:
		f.done()
	}
	return nil
}

// done records the end of an element, and of each aggregate it ends.
func (f *framer) done() {
	for f.depth > 0 {
		if f.left[f.depth-1]--; f.left[f.depth-1] > 0 {
			return
		}
		if f.depth--; f.attr[f.depth] {
			return
		}
	}
	f.spent = 0 // a top-level reply ended
}

// spend counts n against maxReply.
func (f *framer) spend(n int64) error {
	if f.spent += n; f.spent > maxReply {
		return f.tooLarge("reply counting %d bytes so far exceeds the %d-byte limit per reply", f.spent, maxReply)
	}
	return nil
}

func (f *framer) tooLarge(format string, a ...any) error {
	return &replyError{ErrReplyTooLarge, fmt.Sprintf("%v: %s: %s", ErrReplyTooLarge, f.addr, fmt.Sprintf(format, a...))}
}

func (f *framer) notRedis(format string, a ...any) error {
	return &replyError{ErrNotRedis, fmt.Sprintf("%v: %s: %s", ErrNotRedis, f.addr, fmt.Sprintf(format, a...))}
}

// replyError is the error of a reply refused, wrapping sentinel. It
// unwraps to a list, not to one error: go-redis strips one level off an
// error of the connection's handshake (errors.Unwrap), which would leave
// the sentinel without the server and the limit.
type replyError struct {
	sentinel error
	msg      string
}

func (e *replyError) Error() string   { return e.msg }
func (e *replyError) Unwrap() []error { return []error{e.sentinel} }

// kindName names the RESP type of type byte b, "" if none.
func kindName(b byte) string {
	switch b {
	case '+':
		return "simple string"
	case '-':
		return "error"
	case ':':
		return "integer"
	case '_':
		return "null"
	case ',':
		return "double"
	case '#':
		return "boolean"
	case '(':
		return "big number"
	case '$':
		return "bulk string"
	case '!':
		return "blob error"
	case '=':
		return "verbatim string"
	case '*':
		return "array"
	case '~':
		return "set"
	case '>':
		return "push"
	case '%':
		return "map"
	case '|':
		return "attribute"
	}
	return ""
}

// isBulk reports whether type b is a length followed by that many bytes.
func isBulk(b byte) bool { return b == '$' || b == '!' || b == '=' }

// isHeader reports whether a line of type b is a length (of bytes or of
// elements) rather than a value.
func isHeader(b byte) bool {
	switch b {
	case '$', '!', '=', '*', '~', '>', '%', '|':
		return true
	}
	return false
}

// limitOf is the limit on the length of type b, and its unit.
func limitOf(b byte) (int, string) {
	if isBulk(b) {
		return maxBulk, "byte"
	}
	return maxElements, "element"
}
