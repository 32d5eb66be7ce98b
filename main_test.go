package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// The binary as a user runs it: help is asked for and answered (exit 0, on
// stdout for the command list); a bare `redislock`, a wrong command, flag or
// value is a usage error (exit 2, on stderr, as Go's own tools do), in one
// line that names the flag, found before anything connects (no kubeconfig
// here: a command that tried to load one would fail with another message);
// a failure after that exits 1.
func TestCommandLine(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "redislock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	commands := []string{"controller", "agent", "webhook-wait", "version"}
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	cases := []struct {
		args     []string
		code     int
		stdout   []string // each must appear on stdout
		stderr   []string // each must appear on stderr
		noStdout bool
		oneLine  bool // stderr is one line
	}{
		{args: nil, code: 2, stderr: append([]string{"usage: redislock"}, commands...), noStdout: true},
		{args: []string{"-h"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		{args: []string{"--help"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		{args: []string{"help"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		// A command's flags, asked for, are its output: stdout.
		{args: []string{"agent", "-h"}, code: 0, stdout: []string{"-lock", "-label-pod", "-cluster-id", "-kubeconfig"}},
		{args: []string{"agent", "--help"}, code: 0, stdout: []string{"-lock"}},
		{args: []string{"controller", "-h"}, code: 0, stdout: []string{"-metrics-bind-address", "-agent-image", "-kubeconfig"}},
		{args: []string{"controller", "--help"}, code: 0, stdout: []string{"-leader-elect"}},
		{args: []string{"webhook-wait", "-h"}, code: 0, stdout: []string{"-url", "-connect", "-ca-file", "-timeout"}},
		{args: []string{"webhook-wait", "-url", "http://x"}, code: 2, stderr: []string{"webhook-wait: -url", "want https://"}, noStdout: true, oneLine: true},
		{args: []string{"webhook-wait", "-url", "https://x", "-timeout=0s"}, code: 2, stderr: []string{"webhook-wait: -timeout 0s"}, noStdout: true, oneLine: true},
		{args: []string{"webhook-wait", "-nope"}, code: 2, stderr: []string{"webhook-wait: flag provided but not defined: -nope", "redislock webhook-wait -h"}, noStdout: true, oneLine: true},
		{args: []string{"version"}, code: 0, stdout: []string{versionOf(chartAppVersion(t), builtInfo(t, bin))}},
		{args: []string{"version", "-x"}, code: 2, stderr: []string{`version takes no flags or arguments; got ["-x"]`}, noStdout: true, oneLine: true},
		// No kubeconfig anywhere: where it looked, in one line, naming
		// the flag (not client-go's KUBERNETES_MASTER, nor a log line).
		{args: []string{"agent", "-lock", "l", "-namespace", "ns", "-identity", "a"}, code: 1, stderr: []string{"agent: kubeconfig: no API server to talk to: pass -kubeconfig FILE, set $KUBECONFIG"}, noStdout: true, oneLine: true},
		{args: []string{"controller"}, code: 1, stderr: []string{"kubeconfig: no API server to talk to: pass -kubeconfig FILE"}, noStdout: true, oneLine: true},
		// -kubeconfig is the file both commands connect with.
		{args: []string{"agent", "-kubeconfig", missing, "-lock", "l", "-namespace", "ns", "-identity", "a"}, code: 1, stderr: []string{"agent: kubeconfig " + missing}, noStdout: true},
		{args: []string{"controller", "-kubeconfig", missing}, code: 1, stderr: []string{"controller: kubeconfig " + missing}, noStdout: true},
		{args: []string{"nope"}, code: 2, stderr: []string{`unknown subcommand "nope"`}, noStdout: true, oneLine: true},
		// Usage errors, checked before a kubeconfig is loaded.
		// Every required value missing, at once.
		{args: []string{"agent"}, code: 2, stderr: []string{"agent: -lock: required", "agent: -namespace (or $POD_NAMESPACE): required", "agent: -identity (or $POD_NAME): required", "redislock agent -h"}, noStdout: true},
		{args: []string{"agent", "-lock", "Bad_Name"}, code: 2, stderr: []string{`agent: -lock: "Bad_Name" is not a RedisLock name`, "agent: -namespace (or $POD_NAMESPACE): required"}, noStdout: true},
		{args: []string{"agent", "-lock", "Bad_Name", "-namespace", "ns", "-identity", "a"}, code: 2, stderr: []string{`agent: -lock: "Bad_Name" is not a RedisLock name`}, noStdout: true, oneLine: true},
		{args: []string{"agent", "-lock", "l", "-namespace", "ns", "-identity", "a", "-on-lost=maybe", "--", "true"}, code: 2, stderr: []string{`agent: -on-lost: "maybe": want exit or campaign`}, noStdout: true, oneLine: true},
		{args: []string{"agent", "-lock", "l", "-namespace", "ns", "-identity", "a", "-on-lost=campaign"}, code: 2, stderr: []string{"agent: -on-lost: set without a command"}, noStdout: true, oneLine: true},
		{args: []string{"agent", "-nope"}, code: 2, stderr: []string{"agent: flag provided but not defined: -nope", "redislock agent -h"}, noStdout: true, oneLine: true},
		{args: []string{"agent", "-label-pod=maybe"}, code: 2, stderr: []string{`agent: invalid boolean value "maybe" for -label-pod`}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-webhook-certs=bogus"}, code: 2, stderr: []string{`controller: -webhook-certs="bogus": want self or provided`}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-agent-image=x"}, code: 2, stderr: []string{"controller: -webhook-certs=self needs POD_NAMESPACE"}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-leader-election-redislock=x"}, code: 2, stderr: []string{`controller: -leader-election-redislock="x": want NAMESPACE/NAME`}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-leader-elect", "-leader-election-redislock=a/b"}, code: 2, stderr: []string{"controller: -leader-elect (a Lease) and -leader-election-redislock exclude each other"}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-max-concurrent-reconciles=0"}, code: 2, stderr: []string{"controller: -max-concurrent-reconciles=0: want 1 or more"}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-watch-namespaces=Shop"}, code: 2, stderr: []string{`controller: -watch-namespaces: "Shop"`}, noStdout: true, oneLine: true},
		{args: []string{"controller", "-agent-cpu-request=lots"}, code: 2, stderr: []string{`controller: -agent-cpu-request="lots" is not a quantity`}, noStdout: true, oneLine: true},
		{args: []string{"controller", "extra"}, code: 2, stderr: []string{`controller: unexpected arguments ["extra"]`}, noStdout: true, oneLine: true},
	}
	for _, tc := range cases {
		t.Run(strings.Join(append([]string{"redislock"}, tc.args...), " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
			// No kubeconfig anywhere, and not in a cluster.
			cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := 0
			if err := cmd.Run(); err != nil {
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatal(err)
				}
				code = exit.ExitCode()
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, &stdout, &stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout %q lacks %q", &stdout, want)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q lacks %q", &stderr, want)
				}
			}
			if n := strings.Count(strings.TrimSuffix(stderr.String(), "\n"), "\n") + 1; tc.oneLine && n != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", n, &stderr)
			}
			if tc.noStdout && stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", &stdout)
			}
			if tc.code == 0 && strings.Contains(stderr.String(), "redislock:") {
				t.Errorf("stderr %q reports an error", &stderr)
			}
		})
	}
}

// builtInfo is the build information the go command stamped into bin.
func builtInfo(t *testing.T, bin string) *debug.BuildInfo {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	// The first line names the file and the Go version; the others are
	// debug.BuildInfo's text form, each indented by a tab.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")[1:]
	for i := range lines {
		lines[i] = strings.TrimPrefix(lines[i], "\t")
	}
	bi, err := debug.ParseBuildInfo(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatalf("parse the build information of %s: %v\n%s", bin, err, out)
	}
	return bi
}

func TestVersionNamesTheCommit(t *testing.T) {
	mod := debug.Module{Path: "github.com/redislock/redislock", Version: "(devel)"}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "accf39e0000000000000000000000000000000000"}
	cases := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"clean tree", []debug.BuildSetting{rev, {Key: "vcs.modified", Value: "false"}}, "redislock v0.1.0 commit accf39e0000000000000000000000000000000000"},
		{"uncommitted changes", []debug.BuildSetting{rev, {Key: "vcs.modified", Value: "true"}}, "redislock v0.1.0 commit accf39e0000000000000000000000000000000000 (modified)"},
		{"no VCS stamp", nil, "redislock v0.1.0 commit unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf("v0.1.0", &debug.BuildInfo{Main: mod, Settings: tc.settings}); got != tc.want {
				t.Errorf("versionOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// chartAppVersion reads the chart's appVersion from the file itself, not
// from the copy the binary embeds.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("charts", "redislock", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "appVersion: "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no appVersion in charts/redislock/Chart.yaml")
	return ""
}

// An agent that cannot reach the API server retries: it logs the cause once,
// at info, without the stack trace that zap adds to errors by default
// (which buried the reason once a second).
func TestAgentLogsRetriesWithoutStackTraces(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "redislock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: down, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "agent", "-kubeconfig", kubeconfig, "-lock", "l", "-namespace", "ns",
		"-identity", "a", "-label-pod", "-http-address", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var seen []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		if strings.Contains(line, `"stacktrace"`) {
			t.Fatalf("a log line with a stack trace:\n%s", line)
		}
		if strings.Contains(line, "cannot campaign yet") {
			if !strings.Contains(line, `"level":"info"`) || !strings.Contains(line, "127.0.0.1:1") {
				t.Errorf("want the retry at info with its cause (the API server's address): %s", line)
			}
			return
		}
	}
	t.Fatalf("the agent stopped or went quiet before it logged a retry (%v); its log:\n%s", sc.Err(), strings.Join(seen, "\n"))
}
