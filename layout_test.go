package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
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

// The controller, its command and the agent stay made of functions that
// do one job each: none (but tests) is over 60 lines.
func TestNoLongFunctionsInTheControllerAndTheAgent(t *testing.T) {
	const most = 60
	fset := token.NewFileSet()
	for _, dir := range []string{"internal/controller", "internal/controllercmd", "internal/agent"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > most {
						t.Errorf("%s: %s is %d lines; split it (at most %d)", f, fd.Name.Name, n, most)
					}
				}
			}
		}
	}
}
