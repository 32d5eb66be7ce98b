package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine describes where the benchmarks ran.
type machine struct {
	cpu, kernel, goVersion, redis string
	cores                         int
}

// readMachine reads the CPU model from /proc/cpuinfo, the kernel release,
// the Go version this command was built with (the one `go run` used) and
// the version `redis-server --version` prints; what cannot be read is
// "unknown".
func readMachine() machine {
	m := machine{cpu: "unknown", kernel: "unknown", redis: "unknown", goVersion: runtime.Version(), cores: runtime.NumCPU()}
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
