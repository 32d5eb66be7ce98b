// Command crdrules writes out, in the CRD files it is given, the
// shorthands that the API types' validation rules use, so that each rule
// they stand for is written once in the source: controller-gen copies each
// XValidation rule as written. make manifests runs it after controller-gen.
//
//	isDuration(x)         x.matches('<v1alpha1.DurationPattern>')
//	isDurationInRange(x)  isDuration(x) and x within [MinDuration, MaxDuration]
//	isNodeTimeout(x)      isDuration(x) and x within [MinDuration, redislock.MaxNodeTimeout]
//	renewIntervalOf(s)    s.renewInterval in ns, or the engine's default from s.ttl
//	renewDeadlineOf(s)    s.renewDeadline in ns, or the engine's default from s.ttl
//	ttlLessDriftOf(s)     s.ttl in ns less the engine's clock-drift allowance
//
// The defaults are the fractions of the ttl that redislock.Timing's
// WithDefaults gives, so the API server derives them as the engine does.
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redislock"
)

// shorthand is one function the rules may call, with its argument (a CEL
// identifier or a field selection: self, d, self.ttl) and what it stands
// for, in which each %[1]s is the argument.
type shorthand struct {
	name, expansion string
}

// shorthands are expanded in this order: a later one may appear in an
// earlier one's expansion.
func shorthands() []shorthand {
	def := redislock.Timing{TTL: time.Hour}.WithDefaults()
	return []shorthand{
		{"isDurationInRange", inRange(v1alpha1.MinDuration, v1alpha1.MaxDuration)},
		{"isNodeTimeout", inRange(v1alpha1.MinDuration, redislock.MaxNodeTimeout.String())},
		{"renewIntervalOf", "(has(%[1]s.renewInterval) ? int(duration(%[1]s.renewInterval)) : int(duration(%[1]s.ttl)) * " + fraction(def.RenewInterval, def.TTL) + ")"},
		{"renewDeadlineOf", "(has(%[1]s.renewDeadline) ? int(duration(%[1]s.renewDeadline)) : int(duration(%[1]s.ttl)) * " + fraction(def.RenewDeadline, def.TTL) + ")"},
		// redislock's drift: 1% of the ttl plus 2ms (Redlock's allowance);
		// TestAPIServerAndEngineAgreeOnTiming holds the two together.
		{"ttlLessDriftOf", "int(duration(%[1]s.ttl)) - int(duration(%[1]s.ttl)) / 100 - 2000000"},
		{"isDuration", "%[1]s.matches('" + v1alpha1.DurationPattern + "')"},
	}
}

// inRange is the expansion of a check that a duration parses and lies in
// [lo, hi].
func inRange(lo, hi string) string {
	return fmt.Sprintf("isDuration(%%[1]s) && duration(%%[1]s) >= duration('%s') && duration(%%[1]s) <= duration('%s')", lo, hi)
}

// fraction writes part/whole as CEL integer arithmetic, "2 / 15", in
// lowest terms.
func fraction(part, whole time.Duration) string {
	a, b := int64(part), int64(whole)
	for x, y := a, b; ; {
		if y == 0 {
			return fmt.Sprintf("%d / %d", a/x, b/x)
		}
		x, y = y, x%y
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdrules CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := expandFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "crdrules:", err)
			os.Exit(1)
		}
	}
}

// expandFile rewrites the file at path with every shorthand written out.
func expandFile(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, s := range shorthands() {
		if src, err = expand(src, s); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return os.WriteFile(path, src, 0o644)
}

// expand writes out every use of s in src, quoted for the YAML scalar it
// is in: in a single-quoted one (a rule that starts with a character YAML
// reserves, such as !), each ' is doubled.
func expand(src []byte, s shorthand) ([]byte, error) {
	use := regexp.MustCompile(regexp.QuoteMeta(s.name) + `\(([A-Za-z_][A-Za-z0-9_.]*)\)`)
	var out bytes.Buffer
	last := 0
	for _, m := range use.FindAllSubmatchIndex(src, -1) {
		rule := bytes.LastIndex(src[:m[0]], []byte("rule: "))
		if rule < 0 {
			return nil, fmt.Errorf("%s outside a rule, at byte %d", s.name, m[0])
		}
		text := fmt.Sprintf(s.expansion, src[m[2]:m[3]])
		if src[rule+len("rule: ")] == '\'' {
			text = strings.ReplaceAll(text, "'", "''")
		}
		out.Write(src[last:m[0]])
		out.WriteString(text)
		last = m[1]
	}
	out.Write(src[last:])
	return out.Bytes(), nil
}
