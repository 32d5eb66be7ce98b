package redisconn

import (
	"errors"
	"strings"
	"testing"
)

// FuzzFramer feeds the framer arbitrary streams, whole and cut in two
// reads at an arbitrary point, and checks it against reference, a parser
// written apart from it: it never panics, and it refuses a stream exactly
// when reference finds in it a reply over a limit, or not RESP.
func FuzzFramer(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "$5\r\nhello\r\n", "*2\r\n:1\r\n$-1\r\n", "%1\r\n+a\r\n_\r\n", "|1\r\n+a\r\n+b\r\n>1\r\n#t\r\n",
		"!3\r\nERR\r\n", "=7\r\ntxt:abc\r\n", "~1\r\n,1.5\r\n", "(12345\r\n", "$100000000000\r\n", "*65537\r\n",
		strings.Repeat("*1\r\n", maxDepth+1), strings.Repeat("*65536\r\n", 9), "$?\r\n", "HTTP/1.1 200 OK\r\n",
	} {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		want := reference(in)
		for _, at := range []int{len(in), int(cut) % (len(in) + 1)} {
			fr := &framer{addr: "fuzz"}
			err := fr.check(in[:at])
			if err == nil {
				err = fr.check(in[at:])
			}
			if (err == nil) != (want == nil) {
				t.Fatalf("cut at %d: framer says %v, reference %v", at, err, want)
			}
			if err != nil && !errors.Is(err, ErrReplyTooLarge) && !errors.Is(err, ErrNotRedis) {
				t.Fatalf("cut at %d: error %v wraps neither sentinel", at, err)
			}
		}
	})
}

// errShort is reference's word for a stream that ends inside a reply.
var errShort = errors.New("short")

// reference parses in, one top-level reply after another, and returns
// the first rule a reply breaks (a limit, or RESP framing), nil if none
// before in ends.
func reference(in []byte) error {
	r := refParser{in: in}
	for r.i < len(r.in) {
		r.spent = 0
		if err := r.element(0); err != nil {
			if errors.Is(err, errShort) {
				return nil
			}
			return err
		}
	}
	return nil
}

type refParser struct {
	in    []byte
	i     int
	spent int64
}

func (r *refParser) spend(n int64) error {
	if r.spent += n; r.spent > maxReply {
		return ErrReplyTooLarge
	}
	return nil
}

// element parses one element with depth aggregates around it.
func (r *refParser) element(depth int) error {
	if r.i == len(r.in) {
		return errShort
	}
	t := r.in[r.i]
	if !strings.ContainsRune("+-:_,#($!=*~>%|", rune(t)) {
		return ErrNotRedis
	}
	r.i++
	line, err := r.line(strings.ContainsRune("$!=*~>%|", rune(t)))
	if err != nil {
		return err
	}
	if !strings.ContainsRune("$!=*~>%|", rune(t)) {
		return r.spend(int64(len(line)))
	}
	digits, neg := strings.CutPrefix(line, "-")
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	switch {
	case digits == "" || neg && n != 1:
		return ErrNotRedis
	case neg: // null
		return nil
	case strings.ContainsRune("$!=", rune(t)):
		if n > maxBulk {
			return ErrReplyTooLarge
		}
		if err := r.spend(n); err != nil {
			return err
		}
		if int64(len(r.in)-r.i) < n+2 {
			if rest := r.in[r.i+min(len(r.in)-r.i, int(n)):]; len(rest) > 0 && rest[0] != '\r' {
				return ErrNotRedis
			}
			return errShort
		}
		r.i += int(n)
		if r.in[r.i] != '\r' || r.in[r.i+1] != '\n' {
			return ErrNotRedis
		}
		r.i += 2
		return nil
	}
	if t == '%' || t == '|' {
		n *= 2
	}
	if n > maxElements || depth == maxDepth {
		return ErrReplyTooLarge
	}
	if err := r.spend(n * elementCost); err != nil {
		return err
	}
	for range n {
		if err := r.element(depth + 1); err != nil {
			return err
		}
	}
	if t == '|' { // an attribute comes before the element it is about
		return r.element(depth)
	}
	return nil
}

// line reads the rest of a line, its CRLF dropped; a header's must be
// digits, after a '-' or not.
func (r *refParser) line(header bool) (string, error) {
	rest := r.in[r.i:]
	end := len(rest)
	for j, c := range rest {
		if c == '\n' {
			end = j
			break
		}
	}
	s := string(rest[:end])
	if len(s) > maxLine+1 {
		return "", ErrReplyTooLarge
	}
	body, crlf := strings.CutSuffix(s, "\r")
	if end == len(rest) {
		crlf = false
		body = strings.TrimSuffix(s, "\r") // a CR may end a line not ended yet
	}
	if header {
		digits := strings.TrimPrefix(body, "-")
		for k, c := range digits {
			if k == maxDigits {
				return "", ErrReplyTooLarge
			}
			if c < '0' || c > '9' {
				return "", ErrNotRedis
			}
		}
	}
	if end == len(rest) {
		return "", errShort
	}
	if !crlf {
		return "", ErrNotRedis
	}
	r.i += end + 1
	return body, nil
}
