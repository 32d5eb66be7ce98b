package proc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// gone reports whether pid no longer runs: no such process, or a zombie
// that nobody has reaped yet.
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	return processState(stat) == "Z"
}

// processState is the state field of /proc/<pid>/stat: R, S, T, Z...
func processState(stat []byte) string {
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2 : i+3]
	}
	return ""
}

func state(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return processState(stat)
}

// pollGone waits up to 10s for pid to be gone.
func pollGone(pid int) error {
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return gone(pid), nil
	})
	if err != nil {
		return fmt.Errorf("process %d still %s: %w", pid, state(pid), err)
	}
	return nil
}
