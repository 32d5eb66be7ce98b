// Command demo is `make demo`: the whole of redislock on one machine, with
// no cluster (see internal/testing/demo). The Makefile builds the binaries it runs
// and the control plane it starts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/redislock/redislock/internal/testing/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var c demo.Config
	flag.StringVar(&c.Redislock, "redislock", "", "the redislock binary (required)")
	flag.StringVar(&c.SampleOperator, "sample-operator", "", "the test/e2e/sampleoperator binary (required)")
	flag.StringVar(&c.Assets, "assets", "", "directory of kube-apiserver, etcd and kubectl (required)")
	flag.StringVar(&c.Root, "root", ".", "the repository root")
	single := flag.Bool("single", false, "one Redis node instead of three (Redlock)")
	flag.DurationVar(&c.TTL, "ttl", 2*time.Second, "the locks' ttl")
	flag.BoolVar(&c.Keep, "keep", false, "keep everything running after the scenario, until Ctrl-C")
	log := flag.Bool("log", false, "log changes as lines instead of redrawing a table (the default when stdout is not a terminal)")
	flag.Parse()
	if c.Redislock == "" || c.SampleOperator == "" || c.Assets == "" {
		return fmt.Errorf("-redislock, -sample-operator and -assets are required (make demo sets them)")
	}
	if c.TTL < 500*time.Millisecond {
		return fmt.Errorf("-ttl %v: at least 500ms", c.TTL)
	}
	var err error
	if c.Root, err = filepath.Abs(c.Root); err != nil {
		return err
	}
	c.Redlock = !*single
	c.Live = !*log && term.IsTerminal(int(os.Stdout.Fd()))
	c.Out = os.Stdout
	res, err := demo.Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("\noperator failover after kill -9: %v (ttl %v); workload handover after SIGTERM: %v; %d processes started, all stopped\n",
		res.Failover.Round(time.Millisecond), c.TTL, res.Handover.Round(time.Millisecond), len(res.PIDs))
	return nil
}
