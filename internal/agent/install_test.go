package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInstallCopiesTheRunningBinary(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "redislock")
	if err := Install(dest); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o755 || !bytes.Equal(got, want) {
		t.Fatalf("installed %d bytes, mode %v (%v); want the %d bytes of the running binary, mode 0755", len(got), fi.Mode(), err, len(want))
	}
	if err := Install(filepath.Join(t.TempDir(), "missing", "redislock")); err == nil {
		t.Fatal("Install into a missing directory succeeded")
	}
}
