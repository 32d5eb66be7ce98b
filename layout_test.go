package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/redislock/redislock"

// room is where a package of this module lives: what a user imports
// (api, pkg), what the binary is made of (internal), what only tests and
// the demo use (testing), and the rest (the main package, hack, test).
func room(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	switch top, _, _ := strings.Cut(rel, "/"); {
	case top == "api", top == "pkg":
		return top
	case strings.HasPrefix(rel, "internal/testing/"):
		return "testing"
	case top == "internal":
		return "internal"
	}
	return "rest"
}

// mayImport lists, for each room, the rooms its packages' non-test code may
// import: arrows point only down, from the binary to the public packages
// and from those to the API types.
var mayImport = map[string][]string{
	"api":      {},
	"pkg":      {"pkg", "api"},
	"internal": {"internal", "pkg", "api"},
	"testing":  {"testing", "internal", "pkg", "api"},
	"rest":     {"rest", "testing", "internal", "pkg", "api"},
}

// listed is what go list says of a package.
type listed struct {
	ImportPath string
	Imports    []string
}

// goList runs go list -json with args and decodes each package it prints.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("go list %v: %v\n%s", args, err, exit.Stderr)
	} else if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		pkgs = append(pkgs, p)
	}
}

// The public packages stand alone (no pkg/ → internal/), internal/ does
// not reach up to the main package, hack/ or test/, and the binary carries
// none of the test harness.
func TestImportsPointDownTheLayout(t *testing.T) {
	for _, p := range goList(t, "./...") {
		from := room(p.ImportPath)
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := room(imp); !slices.Contains(mayImport[from], to) {
				t.Errorf("%s (%s) imports %s (%s); %s may import only %v", p.ImportPath, from, imp, to, from, mayImport[from])
			}
		}
	}
	for _, p := range goList(t, "-deps", ".") {
		if room(p.ImportPath) == "testing" {
			t.Errorf("the binary contains %s, which is test support", p.ImportPath)
		}
	}
}
