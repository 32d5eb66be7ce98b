package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"
)

// DurationPattern is the CRDs' spelling of "a duration Go's
// time.ParseDuration parses": numbers, each followed by a unit, without
// spaces, and no more digits than an int64 of nanoseconds holds in that
// unit. The XValidation rules of these types write isDuration(x) for
// x.matches(DurationPattern), which no CEL library has: make manifests
// (hack/crdrules) writes it out in the CRDs, so the pattern is written
// once, as are the other shorthands the rules use. A rule guards each duration() call with it, so that a bad text
// gets the field's own message, not a CEL evaluation error.
const DurationPattern = `^((0*[0-9]{1,4}([.][0-9]*)?|[.][0-9]+)h|(0*[0-9]{1,6}([.][0-9]*)?|[.][0-9]+)m|(0*[0-9]{1,8}([.][0-9]*)?|[.][0-9]+)s|(0*[0-9]{1,11}([.][0-9]*)?|[.][0-9]+)ms|(0*[0-9]{1,14}([.][0-9]*)?|[.][0-9]+)(us|µs|μs)|(0*[0-9]{1,17}([.][0-9]*)?|[.][0-9]+)ns)+$`

// MinDuration and MaxDuration bound every duration of these types; a rule
// writes isDurationInRange(x) for x a duration between them (see
// hack/crdrules).
const (
	MinDuration = "1ms"
	MaxDuration = "8760h"
)

// Duration is a length of time written as Go writes it ("15s", "1m30s").
// Unlike metav1.Duration it decodes any string: one that Go cannot parse
// (stored before the CRD refused such values, or written around it) keeps
// its text and Err reports it, so that one such object never stops the
// list and watch of every RedisLock. The CRD's rules accept only what
// parses.
// +kubebuilder:validation:Type=string
type Duration struct {
	// Duration is the length of time; zero when the text does not parse.
	time.Duration `json:"-"`

	invalid string // the text, when it does not parse
}

// Err returns an error naming the text when it is not a duration Go can
// parse, else nil.
func (d *Duration) Err() error {
	if d == nil || d.invalid == "" {
		return nil
	}
	_, err := time.ParseDuration(d.invalid)
	if err == nil {
		err = fmt.Errorf("not a duration")
	}
	return fmt.Errorf("%q: %w", d.invalid, err)
}

// UnmarshalJSON reads a JSON string; text that does not parse is kept for
// Err, never an error here.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{invalid: string(b)}
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		*d = Duration{invalid: s}
		return nil
	}
	*d = Duration{Duration: v}
	return nil
}

// MarshalJSON writes the duration as Go writes it, or the text it was
// read from when that does not parse.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.invalid != "" {
		return json.Marshal(d.invalid)
	}
	return json.Marshal(d.Duration.String())
}
