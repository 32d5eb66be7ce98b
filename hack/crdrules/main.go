// Command crdrules writes out, in the CRD files it is given, the shorthand
// that the API types' validation rules use: controller-gen copies each
// XValidation rule as written, and a rule writes isDuration(x) for
// x.matches('<v1alpha1.DurationPattern>'), so that the pattern is written
// once in the source. make manifests runs it after controller-gen.
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"

	"github.com/redislock/redislock/api/v1alpha1"
)

// shorthand is a use of isDuration: its argument is a CEL identifier or a
// field selection (self, d, self.ttl).
var shorthand = regexp.MustCompile(`isDuration\(([A-Za-z_][A-Za-z0-9_.]*)\)`)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdrules CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := expand(path); err != nil {
			fmt.Fprintln(os.Stderr, "crdrules:", err)
			os.Exit(1)
		}
	}
}

// expand rewrites the file at path with every isDuration(x) written out,
// quoted for the YAML scalar it is in: in a single-quoted one (a rule that
// starts with a character YAML reserves, such as !), each ' is doubled.
func expand(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	last := 0
	for _, m := range shorthand.FindAllSubmatchIndex(src, -1) {
		rule := bytes.LastIndex(src[:m[0]], []byte("rule: "))
		if rule < 0 {
			return fmt.Errorf("%s: isDuration outside a rule, at byte %d", path, m[0])
		}
		quote := "'"
		if src[rule+len("rule: ")] == '\'' {
			quote = "''"
		}
		out.Write(src[last:m[0]])
		fmt.Fprintf(&out, "%s.matches(%s%s%s)", src[m[2]:m[3]], quote, v1alpha1.DurationPattern, quote)
		last = m[1]
	}
	out.Write(src[last:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
