package redislock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redislock/redislock/pkg/redislock"
)

const token = "0123456789abcdef0123456789abcdef"

func TestParseValue(t *testing.T) {
	cases := []struct {
		name, in string
		want     redislock.Value
		bad      string // substring of the error, "" when valid
	}{
		{"valid", "v1:" + token + ":pod-a", redislock.Value{Token: token, Identity: "pod-a"}, ""},
		{"identity with colons", "v1:" + token + ":ns:pod:0", redislock.Value{Token: token, Identity: "ns:pod:0"}, ""},
		{"unknown version", "v2:" + token + ":pod-a", redislock.Value{}, `want prefix "v1:"`},
		{"bsm-style random value", "Zm9vYmFy", redislock.Value{}, "want prefix"},
		{"short token", "v1:0123:pod-a", redislock.Value{}, "hex digits"},
		{"upper-case token", "v1:" + strings.ToUpper(token) + ":pod-a", redislock.Value{}, "non-hex"},
		{"empty identity", "v1:" + token + ":", redislock.Value{}, "identity is empty"},
		{"control character", "v1:" + token + ":a\x00b", redislock.Value{}, "control character"},
		{"invalid UTF-8", "v1:" + token + ":\xff", redislock.Value{}, "UTF-8"},
		{"oversized identity", "v1:" + token + ":" + strings.Repeat("x", 254), redislock.Value{}, "longer than 253"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := redislock.ParseValue(tc.in)
			if tc.bad != "" {
				if !errors.Is(err, redislock.ErrMalformedValue) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("ParseValue(%q) = %v; want ErrMalformedValue saying %q", tc.in, err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseValue(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// FuzzParseValue checks that the decoder never panics, that whatever it
// accepts re-encodes to the same bytes, and that what it accepts follows
// the documented format.
func FuzzParseValue(f *testing.F) {
	f.Add("v1:" + token + ":pod-a")
	f.Add("v1:" + token + ":")
	f.Add("v1:")
	f.Add("garbage")
	f.Add("v1:" + token + ":\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := redislock.ParseValue(s)
		if err != nil {
			if !errors.Is(err, redislock.ErrMalformedValue) {
				t.Fatalf("error %v does not wrap ErrMalformedValue", err)
			}
			return
		}
		if v.String() != s {
			t.Fatalf("%q decodes to %+v, which encodes to %q", s, v, v.String())
		}
		if len(v.Token) != 32 || v.Identity == "" || len(v.Identity) > redislock.MaxIdentityLen {
			t.Fatalf("%q accepted with token %q identity %q", s, v.Token, v.Identity)
		}
	})
}
