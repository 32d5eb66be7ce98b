package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// pythonImage holds the host's Debian python3, its standard library and
// the shared libraries they load: the image examples/python-worker runs in
// on the cluster, where no registry can be reached.
const pythonImage = "redislock.local/python:v1"

// pythonSkip are the parts of the standard library no worker here needs.
var pythonSkip = []string{"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "site-packages", "dist-packages", "__pycache__"}

// pythonFiles lists the host files of the python image: /usr/bin/python3,
// its standard library (/usr/lib/python3.N, without pythonSkip) and every
// shared library that it and the library's extension modules link.
func pythonFiles(ctx context.Context) ([]string, error) {
	const bin = "/usr/bin/python3"
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, fmt.Errorf("python3 (Debian's python3 package): %w", err)
	}
	lib := filepath.Join("/usr/lib", filepath.Base(real)) // /usr/lib/python3.11
	files := []string{bin}
	objects := []string{bin}
	err = filepath.WalkDir(lib, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (slices.Contains(pythonSkip, e.Name()) || strings.HasPrefix(e.Name(), "config-")) {
			return filepath.SkipDir
		}
		if e.IsDir() {
			return nil
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if _, err := os.Stat(p); err != nil {
				return nil // a dangling link: Debian points some at other packages
			}
		}
		files = append(files, p)
		if strings.HasSuffix(p, ".so") {
			objects = append(objects, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	libs, err := sharedLibraries(ctx, objects)
	if err != nil {
		return nil, err
	}
	return append(files, libs...), nil
}

// lddPath is a library path in ldd's output: "libz.so.1 => /lib/.../libz.so.1
// (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)".
var lddPath = regexp.MustCompile(`(?m)(?:=> )?(/\S+) \(0x`)

// sharedLibraries returns the libraries that ldd says objects load, each
// once, at the paths the loader looks for them.
func sharedLibraries(ctx context.Context, objects []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, o := range objects {
		b, err := exec.CommandContext(ctx, "ldd", o).CombinedOutput()
		if err != nil {
			if strings.Contains(string(b), "not a dynamic executable") {
				continue
			}
			return nil, fmt.Errorf("ldd %s: %w\n%s", o, err, b)
		}
		for _, m := range lddPath.FindAllStringSubmatch(string(b), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	return out, nil
}
