package agent

import (
	"fmt"
	"os"
)

// InstallCommand is the subcommand the webhook's init container runs to
// put this binary where a wrapped app container can run it:
// `redislock agent-install DEST`.
const InstallCommand = "agent-install"

// Install copies the running binary to dest, executable, atomically: a
// reader sees no file or the whole binary.
func Install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: %w", InstallCommand, err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("%s: %w", InstallCommand, err)
	}
	defer func() { _ = src.Close() }()
	if err := writeAtomic(dest, 0o755, src); err != nil {
		return fmt.Errorf("%s: %w", InstallCommand, err)
	}
	return nil
}
