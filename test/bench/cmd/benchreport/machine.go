package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine describes where the benchmarks ran, and what code.
type machine struct {
	cpu, kernel, goVersion, redis, source string
	cores                                 int
}

// readMachine reads the CPU model from /proc/cpuinfo, the kernel release,
// the Go version this command was built with (the one `go run` used), the
// version `redis-server --version` prints and the source (see source);
// what cannot be read is "unknown".
func readMachine() machine {
	m := machine{cpu: "unknown", kernel: "unknown", redis: "unknown", goVersion: runtime.Version(), cores: runtime.NumCPU(), source: source()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		// "Redis server v=7.0.15 sha=... malloc=... bits=64 build=..."
		m.redis = strings.TrimSpace(string(out))
		for f := range strings.FieldsSeq(m.redis) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.redis = "redis-server " + v
			}
		}
	}
	return m
}

// source is the commit the benchmarks ran on, and how many tracked files
// differed from it (the report's own directory, docs/bench, aside).
func source() string {
	commit, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(commit))
	out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)docs/bench").Output()
	if err != nil {
		return s
	}
	if n := strings.Count(string(out), "\n"); n > 0 {
		s += fmt.Sprintf(" with uncommitted changes to %d files", n)
	}
	return s
}
