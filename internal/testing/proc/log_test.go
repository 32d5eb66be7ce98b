package proc

import (
	"testing"
)

func TestLogTailIsTheEndOfTheLog(t *testing.T) {
	p := sh(t, `echo 0123456789`, Options{})
	if err := exit(t, p); err != nil {
		t.Fatal(err)
	}
	if got := p.LogTail(4); got != "789\n" {
		t.Errorf("LogTail(4) = %q, want %q", got, "789\n")
	}
	if got := p.LogTail(100); got != "0123456789\n" {
		t.Errorf("LogTail(100) = %q, want the whole log", got)
	}
}
