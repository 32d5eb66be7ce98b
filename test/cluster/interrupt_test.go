package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptTimeout bounds an interrupted up, from its start to its exit.
const interruptTimeout = 5 * time.Minute

// Ctrl-C during `hack/cluster up` stops what up started: once the node's
// kube-apiserver is up, a SIGINT to up's process group (what a terminal
// sends) makes up stop the node and exit, and `hack/cluster check` (what
// down ends with) finds no process of the node's pid namespace or naming
// the state directory, no mount below it, no cgroup of its root. It runs a
// second cluster of its own, in a directory (and so a cgroup root) of its
// own, beside the tests' cluster.
func TestInterruptedUpLeavesNothing(t *testing.T) {
	needCluster(t)
	dir, err := os.MkdirTemp("", "redislock-interrupted-")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "cluster")
	build := exec.Command("go", "build", "-o", exe, "./hack/cluster")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/cluster: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	up := exec.CommandContext(ctx, exe, "up", "-dir", dir)
	up.Dir = repoRoot
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a terminal's job
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up.Stderr = up.Stdout
	start := time.Now()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Had the test failed before up went down: down, by the same
		// program, then the directory.
		if out, err := exec.Command(exe, "down", "-dir", dir).CombinedOutput(); err != nil {
			t.Errorf("down after the test: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	var out strings.Builder
	var s struct {
		Pid   int    `json:"pid"`
		PidNS string `json:"pidNS"`
	}
	sc := bufio.NewScanner(stdout)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if signalled || !strings.Contains(line, "node cluster:") || !strings.Contains(line, "kube-apiserver") {
			continue
		}
		// The node records its pid namespace as soon as it runs.
		b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
		if err != nil || json.Unmarshal(b, &s) != nil || s.Pid == 0 || s.PidNS == "" {
			t.Fatalf("kube-apiserver up, but no pid and pid namespace in cluster.json (%v): %s", err, b)
		}
		t.Logf("kube-apiserver up %.1fs after up started (node pid %d, %s): SIGINT", time.Since(start).Seconds(), s.Pid, s.PidNS)
		if err := syscall.Kill(-up.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		signalled = true
		start = time.Now()
	}
	err = up.Wait()
	if !signalled {
		t.Fatalf("up ended (%v) before kube-apiserver was up:\n%s", err, out.String())
	}
	t.Logf("up exited %.1fs after SIGINT: %v", time.Since(start).Seconds(), err)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out.String(), "interrupted") {
		t.Errorf("up after SIGINT: %v, want it to fail saying interrupted:\n%s", err, out.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("up did not exit within %v of its start", interruptTimeout)
	}
	// Gone, or a zombie its new parent has not reaped yet.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid)); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'Z' {
			t.Errorf("the node's unshare (pid %d) still runs: %s", s.Pid, b)
		}
	}
	if b, err := exec.Command(exe, "check", "-dir", dir, "-pidns", s.PidNS).CombinedOutput(); err != nil {
		t.Errorf("after the interrupted up: %v\n%s", err, b)
	}
}
