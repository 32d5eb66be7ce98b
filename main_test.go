package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// The binary as a user runs it: help is asked for and answered (exit 0, on
// stdout for the command list), a bare `redislock` is a usage error (exit 2,
// on stderr, as Go's own tools do), and a wrong command is an error (exit 1).
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
	}{
		{args: nil, code: 2, stderr: append([]string{"usage: redislock"}, commands...), noStdout: true},
		{args: []string{"-h"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		{args: []string{"--help"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		{args: []string{"help"}, code: 0, stdout: append([]string{"usage: redislock"}, commands...)},
		// The flag package prints a command's flags on stderr.
		{args: []string{"agent", "-h"}, code: 0, stderr: []string{"-lock", "-label-pod", "-cluster-id", "-kubeconfig"}},
		{args: []string{"agent", "--help"}, code: 0, stderr: []string{"-lock"}},
		{args: []string{"controller", "-h"}, code: 0, stderr: []string{"-metrics-bind-address", "-agent-image", "-kubeconfig"}},
		{args: []string{"controller", "--help"}, code: 0, stderr: []string{"-leader-elect"}},
		{args: []string{"webhook-wait", "-h"}, code: 0, stderr: []string{"-url", "-connect", "-ca-file", "-timeout"}},
		{args: []string{"webhook-wait", "-url", "http://x"}, code: 1, stderr: []string{"webhook-wait: -url", "want https://"}, noStdout: true},
		{args: []string{"version"}, code: 0, stdout: []string{versionOf(chartAppVersion(t), builtInfo(t, bin))}},
		// -kubeconfig is the file both commands connect with.
		{args: []string{"agent", "-kubeconfig", missing, "-lock", "l", "-namespace", "ns", "-identity", "a"}, code: 1, stderr: []string{"agent: kubeconfig " + missing}, noStdout: true},
		{args: []string{"controller", "-kubeconfig", missing}, code: 1, stderr: []string{"controller: kubeconfig " + missing}, noStdout: true},
		{args: []string{"nope"}, code: 1, stderr: []string{`unknown subcommand "nope"`}, noStdout: true},
	}
	for _, tc := range cases {
		t.Run(strings.Join(append([]string{"redislock"}, tc.args...), " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
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
