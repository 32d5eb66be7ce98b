// Command redislock is the redislock binary. Subcommands:
//
//	controller    run the RedisLock controller (see -h)
//	agent         campaign for a RedisLock as a pod's sidecar (see -h)
//	webhook-wait  wait until the injection webhook answers through its Service (see -h)
//	tenant-acl    print the Redis ACL rules of a namespace's user (see -h)
//	version       print the version and the commit it was built from
//
// `make demo` (hack/demo) runs the whole system on one machine.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/agent"
	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/controllercmd"
	"github.com/redislock/redislock/internal/tenantacl"
	"github.com/redislock/redislock/internal/webhookwait"
)

const usage = `usage: redislock <command> [flags]

Commands:
  controller    run the RedisLock controller
  agent         campaign for a RedisLock as a pod's sidecar
  webhook-wait  wait until the injection webhook answers through its Service
                (the Helm chart's post-install and post-upgrade hook)
  tenant-acl    print the Redis ACL rules of a namespace's user, for a
                ClusterRedisConnection with spec.tenantSecretName
  version       print the version and the commit it was built from

Run 'redislock <command> -h' for a command's flags.
`

// errNoCommand means redislock was run without arguments.
var errNoCommand = errors.New("no command")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, errNoCommand):
		fmt.Fprint(os.Stderr, usage)
		stop()
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "redislock:", err)
		stop()
		code := 1
		var exit *agent.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.Code
		case errors.Is(err, cli.ErrUsage):
			code = 2 // as the flag package has it
		}
		os.Exit(code)
	}
}

// run runs the command args name, writing what the user asked to see
// (usage, version) to stdout. A command line that cannot run gives an
// error matching cli.ErrUsage (exit 2). Asking a command for its flags (-h) is not an
// error: the flag package has printed them.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errNoCommand
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		_, err = fmt.Fprint(stdout, usage)
	case "version":
		if len(args) > 1 {
			return cli.Usagef("version takes no flags or arguments; got %q", args[1:])
		}
		err = version(stdout)
	case "controller":
		err = controllercmd.Run(ctx, args[1:])
	case "agent":
		err = agent.Command(ctx, args[1:])
	case tenantacl.Name:
		err = tenantacl.Command(ctx, args[1:], stdout)
	case webhookwait.Name:
		err = webhookwait.Command(ctx, args[1:], os.Stderr)
	case agent.InstallCommand: // run by the webhook's init container
		if len(args) != 2 {
			return cli.Usagef("usage: redislock %s DEST", agent.InstallCommand)
		}
		err = agent.Install(args[1])
	case agent.GuardCommand: // run by the agent, not by users
		var code int
		if code, err = agent.Guard(ctx, args[1:], os.Stdin, clock.RealClock{}, agent.Monotonic); err == nil && code != 0 {
			err = &agent.ExitError{Code: code, Reason: "the command exited"}
		}
	default:
		return cli.Usagef("unknown subcommand %q: want controller, agent, webhook-wait or version (redislock help lists them)", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// chart is the Helm chart's Chart.yaml, whose appVersion is the release's
// version: the one source of the binary's version, the chart's and the
// image's (the Dockerfile copies it).
//
//go:embed charts/redislock/Chart.yaml
var chart []byte

// version writes versionOf the running binary.
func version(w io.Writer) error {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("version: the binary carries no build information")
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil {
		return fmt.Errorf("version: the embedded Chart.yaml: %w", err)
	}
	if c.AppVersion == "" {
		return errors.New("version: the embedded Chart.yaml has no appVersion")
	}
	_, err := fmt.Fprintln(w, versionOf(c.AppVersion, bi))
	return err
}

// versionOf says the release version and the VCS commit that bi records, as
// the go command stamped them: "commit unknown" when it stamped none (a
// build with -buildvcs=false, outside a repository, or in a git worktree,
// whose .git is a file), and "(modified)" after the commit when the tree
// had uncommitted changes.
func versionOf(release string, bi *debug.BuildInfo) string {
	commit, modified := "unknown", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			commit = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " (modified)"
		}
	}
	return fmt.Sprintf("redislock %s commit %s%s", release, commit, modified)
}
