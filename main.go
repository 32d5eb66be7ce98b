// Command redislock is the redislock binary. Subcommands:
//
//	controller  run the RedisLock controller (see -h)
//	agent       campaign for a RedisLock as a pod's sidecar (see -h)
//
// `make demo` (hack/demo) runs the whole system on one machine.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/utils/clock"

	"github.com/redislock/redislock/internal/agent"
	"github.com/redislock/redislock/internal/controllercmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "redislock:", err)
		stop()
		code := 1
		var exit *agent.ExitError
		if errors.As(err, &exit) {
			code = exit.Code
		}
		os.Exit(code)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: redislock controller|agent [flags]")
	}
	switch args[0] {
	case "controller":
		return controllercmd.Run(ctx, args[1:])
	case "agent":
		return agent.Command(ctx, args[1:])
	case agent.GuardCommand: // run by the agent, not by users
		code, err := agent.Guard(ctx, args[1:], os.Stdin, clock.RealClock{})
		if err == nil && code != 0 {
			err = &agent.ExitError{Code: code, Reason: "the command exited"}
		}
		return err
	}
	return fmt.Errorf("unknown subcommand %q: want controller or agent", args[0])
}
