package redislock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The value stored under a lock key, format version 1:
//
//	v1:<token>:<identity>
//
// token is 32 lowercase hexadecimal digits (128 bits from crypto/rand, new
// for every acquisition); identity is the holder's name as given in
// Options.Identity (1 to MaxIdentityLen bytes of UTF-8, colons allowed, no
// control characters). Renewal and release compare the whole value, so only
// the acquisition that wrote it can extend or delete it. Observers (the
// controller, kubectl users running GET) parse it with parseValue to learn who
// holds the lock; the token itself is a secret of the holder and is never
// shown by this project's status or logs.
const (
	valuePrefix = "v1:"
	tokenBytes  = 16
	tokenLen    = 2 * tokenBytes
	// MaxIdentityLen is the longest identity, in bytes, a value can carry.
	MaxIdentityLen = 253
)

// value is a decoded lock value.
type value struct {
	// Token identifies one acquisition; it is unique with overwhelming
	// probability and changes on every acquisition, even by the same holder.
	Token string
	// Identity names the holder (a pod name, a hostname).
	Identity string
}

// String encodes v in format version 1.
func (v value) String() string {
	return valuePrefix + v.Token + ":" + v.Identity
}

// parseValue decodes a stored lock value. It returns an error wrapping
// ErrMalformedValue for anything this package does not write: another
// format version, a short or non-hex token, an empty, oversized or non-UTF-8
// identity.
func parseValue(s string) (value, error) {
	rest, ok := strings.CutPrefix(s, valuePrefix)
	if !ok {
		return value{}, fmt.Errorf("%w: want prefix %q", ErrMalformedValue, valuePrefix)
	}
	if len(rest) < tokenLen+1 || rest[tokenLen] != ':' {
		return value{}, fmt.Errorf("%w: want %d hex digits of token then ':'", ErrMalformedValue, tokenLen)
	}
	token, identity := rest[:tokenLen], rest[tokenLen+1:]
	for i := 0; i < len(token); i++ {
		if c := token[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return value{}, fmt.Errorf("%w: token has non-hex byte %q", ErrMalformedValue, c)
		}
	}
	if err := checkIdentity(identity); err != nil {
		return value{}, fmt.Errorf("%w: %w", ErrMalformedValue, err)
	}
	return value{Token: token, Identity: identity}, nil
}

// checkIdentity enforces the identity rules shared by Options and parseValue.
func checkIdentity(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("identity is empty")
	case len(id) > MaxIdentityLen:
		return fmt.Errorf("identity is %d bytes, longer than %d", len(id), MaxIdentityLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("identity is not valid UTF-8")
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("identity has control character %U", r)
		}
	}
	return nil
}

// writeValue writes a fresh value for identity to b, with a new random
// token.
func writeValue(b *strings.Builder, identity string) {
	var raw [tokenBytes]byte
	// crypto/rand.Read never returns an error on supported platforms; it
	// crashes the program instead of handing out a predictable token.
	_, _ = rand.Read(raw[:])
	var hexTok [tokenLen]byte
	hex.Encode(hexTok[:], raw[:])
	b.WriteString(valuePrefix)
	b.Write(hexTok[:])
	b.WriteByte(':')
	b.WriteString(identity)
}

// valueLen is the length of a value for identity.
func valueLen(identity string) int { return len(valuePrefix) + tokenLen + 1 + len(identity) }
