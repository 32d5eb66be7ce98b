package redisconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// feed runs in through a new framer in reads of at most chunk bytes
// (all of it at once when chunk is 0), and returns the framer and its
// error.
func feed(in []byte, chunk int) (*framer, error) {
	f := &framer{addr: "test:6379"}
	if chunk == 0 {
		chunk = len(in)
	}
	for len(in) > 0 {
		k := min(chunk, len(in))
		if err := f.check(in[:k]); err != nil {
			return f, err
		}
		in = in[k:]
	}
	return f, nil
}

// rep is s repeated n times.
func rep(s string, n int) string { return strings.Repeat(s, n) }

// bulk is a bulk string of n bytes.
func bulk(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, rep("x", n)) }

// clusterSlots is a CLUSTER SLOTS reply, as Redis 7 sends it in RESP3,
// of a Cluster cut into 16384 single-slot ranges, each served by a master
// and one replica.
func clusterSlots() string {
	var b strings.Builder
	b.WriteString("*16384\r\n")
	node := func(ip string, port int) string {
		return fmt.Sprintf("*4\r\n$%d\r\n%s\r\n:%d\r\n$40\r\n%s\r\n%%0\r\n", len(ip), ip, port, rep("f", 40))
	}
	for s := range 16384 {
		fmt.Fprintf(&b, "*4\r\n:%d\r\n:%d\r\n%s%s", s, s, node("10.244.123.45", 6379), node("10.244.123.46", 6379))
	}
	return b.String()
}

// The framing check of limitReplies, fed byte streams: every RESP2 and
// RESP3 type passes, each limit holds at its value and breaks one past it,
// and whatever is not RESP fails, however the stream is cut into reads.
func TestFramerChecksRepliesAgainstTheLimits(t *testing.T) {
	const (
		pass    = iota // replies, each ended
		partial        // the start of a reply, nothing refused yet
		tooLarge
		notRedis
	)
	tests := []struct {
		name string
		in   string
		want int
		msg  string // in the error
	}{
		// Every type, as Redis sends it.
		{"simple string", "+OK\r\n", pass, ""},
		{"error", "-ERR unknown command 'HELLO'\r\n", pass, ""},
		{"integer", ":-42\r\n", pass, ""},
		{"RESP3 null", "_\r\n", pass, ""},
		{"double", ",3.14\r\n,inf\r\n", pass, ""},
		{"boolean", "#t\r\n", pass, ""},
		{"big number", "(3492890328409238509324850943850943825024385\r\n", pass, ""},
		{"bulk string", "$5\r\nhello\r\n", pass, ""},
		{"bulk string holding CRLF", "$4\r\na\r\nb\r\n", pass, ""},
		{"empty bulk string", "$0\r\n\r\n", pass, ""},
		{"RESP2 null bulk string", "$-1\r\n", pass, ""},
		{"RESP2 null array", "*-1\r\n", pass, ""},
		{"blob error", "!21\r\nSYNTAX invalid syntax\r\n", pass, ""},
		{"verbatim string", "=15\r\ntxt:Some string\r\n", pass, ""},
		{"array", "*3\r\n:1\r\n$1\r\na\r\n*-1\r\n", pass, ""},
		{"empty array", "*0\r\n", pass, ""},
		{"set", "~2\r\n+a\r\n+b\r\n", pass, ""},
		{"map", "%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n:2\r\n", pass, ""},
		{"push", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n", pass, ""},
		{"attribute before a reply", "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*1\r\n:2\r\n", pass, ""},
		{"attribute in an array, no element of it", "*1\r\n|1\r\n+a\r\n+b\r\n:1\r\n", pass, ""},
		{"empty attribute", "|0\r\n:1\r\n", pass, ""},
		{"HELLO 3", "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n", pass, ""},
		{"CLUSTER SLOTS of 16384 ranges", clusterSlots(), pass, ""},
		{"replies in a row", "+OK\r\n:1\r\n$1\r\na\r\n*1\r\n_\r\n", pass, ""},

		// Each limit, at its value and one past it.
		{"bulk string at the limit", bulk(maxBulk), pass, ""},
		{"bulk string over the limit", bulk(maxBulk + 1), tooLarge, "bulk string of 524289 bytes exceeds the 524288-byte limit"},
		{"bulk string declared huge", "$100000000000\r\n", tooLarge, "test:6379: bulk string of 100000000000 bytes exceeds the 524288-byte limit"},
		{"bulk length of 19 digits", "$1000000000000000000\r\n", tooLarge, "bulk string length of over 18 digits"},
		{"blob error over the limit", "!524289\r\n", tooLarge, "blob error of 524289 bytes"},
		{"verbatim string over the limit", "=524289\r\n", tooLarge, "verbatim string of 524289 bytes"},
		{"array at the limit", "*65536\r\n" + rep(":1\r\n", maxElements), pass, ""},
		{"array over the limit", "*65537\r\n", tooLarge, "array of 65537 elements exceeds the 65536-element limit"},
		{"set over the limit", "~65537\r\n", tooLarge, "set of 65537 elements"},
		{"push over the limit", ">65537\r\n", tooLarge, "push of 65537 elements"},
		{"map at the limit", "%32768\r\n" + rep(":1\r\n", maxElements), pass, ""},
		{"map over the limit", "%32769\r\n", tooLarge, "map of 32769 entries (65538 elements) exceeds the 65536-element limit"},
		{"attribute over the limit", "|32769\r\n", tooLarge, "attribute of 32769 entries"},
		{"nested at the limit", rep("*1\r\n", maxDepth) + ":1\r\n", pass, ""},
		{"nested over the limit", rep("*1\r\n", maxDepth+1), tooLarge, "array nested 17 deep exceeds the depth limit of 16"},
		{"an attribute is a level", rep("*1\r\n", maxDepth) + "|1\r\n", tooLarge, "attribute nested 17 deep"},
		{"nested 100000 deep", rep("*1\r\n", 100000), tooLarge, "nested 17 deep"},
		{"line at the limit", "+" + rep("a", maxLine) + "\r\n", pass, ""},
		{"line over the limit", "-" + rep("a", maxLine+1) + "\r\n", tooLarge, "line longer than the 65536-byte limit"},
		{"line never ended", ":" + rep("1", 2*maxLine), tooLarge, "line longer"},
		{"header of zeros never ended", "$" + rep("0", 2*maxLine), tooLarge, "limit"},
		// 16 elements of 16 and 15 bulk strings at the limit: 256 bytes
		// short of maxReply, which a 16th of 524032 bytes makes up.
		{"reply at the limit", "*16\r\n" + rep(bulk(maxBulk), 15) + bulk(maxBulk-256), pass, ""},
		{"reply over the limit", "*16\r\n" + rep(bulk(maxBulk), 15) + bulk(maxBulk-255), tooLarge, "reply counting 8388609 bytes so far exceeds the 8388608-byte limit per reply"},
		{"each reply its own limit", rep("*16\r\n"+rep(bulk(maxBulk), 15)+bulk(maxBulk-256), 2), pass, ""},
		{"*65536 nested 8 deep", rep("*65536\r\n", 8), partial, ""},
		{"*65536 nested 9 deep", rep("*65536\r\n", 9), tooLarge, "reply counting 9437184 bytes so far exceeds the 8388608-byte limit"},
		{"simple strings count", "*2\r\n+" + rep("a", maxLine) + "\r\n" + rep("*65536\r\n", 8), tooLarge, "reply counting"},

		// Not RESP.
		{"an HTTP server", "HTTP/1.1 400 Bad Request\r\n", notRedis, `test:6379: 'H' is no RESP type`},
		{"an empty line", ":1\r\n\r\n", notRedis, `'\r' is no RESP type`},
		{"a length not a number", "$12a\r\n", notRedis, `bulk string length holds 'a', not a digit`},
		{"a length of spaces", "* 1\r\n", notRedis, "not a digit"},
		{"no length", "*\r\n", notRedis, "array header without a length"},
		{"a minus sign alone", "$-\r\n", notRedis, "without a length"},
		{"a negative length", "$-2\r\n", notRedis, "bulk string length -2 is negative"},
		{"a streamed string", "$?\r\n;4\r\nHell\r\n;0\r\n", notRedis, "streamed bulk string (length ?) is not supported"},
		{"a streamed array", "*?\r\n:1\r\n.\r\n", notRedis, "streamed array"},
		{"a line ended by LF alone", "+OK\n", notRedis, `line ended by \n alone`},
		{"a CR inside a header", "$1\r2\r\n", notRedis, `bulk string header holds \r before its end`},
		{"a payload longer than declared", "$1\r\nab\r\n", notRedis, `bulk string payload not followed by \r\n`},
		{"a payload ended by LF alone", "$1\r\na\n", notRedis, `payload not followed by \r\n`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, in reads of 7 bytes, and a byte at a time.
			for _, chunk := range []int{0, 7, 1} {
				f, err := feed([]byte(tt.in), chunk)
				switch tt.want {
				case pass, partial:
					if err != nil {
						t.Fatalf("reads of %d: %v", chunk, err)
					}
					if ended := f.state == atType && f.depth == 0 && f.spent == 0; tt.want == pass && !ended {
						t.Fatalf("reads of %d: the replies ended in state %d, %d aggregates open, %d spent; want them ended", chunk, f.state, f.depth, f.spent)
					}
				case tooLarge, notRedis:
					want := map[int]error{tooLarge: ErrReplyTooLarge, notRedis: ErrNotRedis}[tt.want]
					if !errors.Is(err, want) || !strings.Contains(err.Error(), tt.msg) {
						t.Fatalf("reads of %d: error %v; want %v, saying %q", chunk, err, want, tt.msg)
					}
				}
			}
		})
	}
}

// A connection whose server broke a limit fails the Read that brought
// the breach, handing go-redis none of its bytes, and every Read after
// it, whatever the server sends next.
func TestLimitConnFailsEveryReadFromTheBreach(t *testing.T) {
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	go func() {
		_, _ = server.Write([]byte("+OK\r\n"))
		_, _ = server.Write([]byte("+OK\r\n$100000000000\r\n"))
		_, _ = server.Write([]byte("+OK\r\n"))
	}()
	c := limitReplies(client, "test:6379")
	buf := make([]byte, 64)
	if n, err := c.Read(buf); string(buf[:n]) != "+OK\r\n" || err != nil {
		t.Fatalf("first Read: %q, %v; want +OK\\r\\n", buf[:n], err)
	}
	n, err := c.Read(buf)
	if n != 0 || !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("Read of the breach: %q, %v; want nothing and ErrReplyTooLarge", buf[:n], err)
	}
	for range 2 {
		if n, err2 := c.Read(buf); n != 0 || !errors.Is(err2, err) {
			t.Fatalf("Read after the breach: %q, %v; want nothing and %v", buf[:n], err2, err)
		}
	}
	if _, ok := c.(interface{ NetConn() net.Conn }); !ok {
		t.Error("the connection does not show the one it reads from (NetConn)")
	}
}
