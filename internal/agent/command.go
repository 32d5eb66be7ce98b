package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/kubeconfig"
	"github.com/redislock/redislock/pkg/redisconn"
)

// optionFlags name, for each Options field that the agent's flags set, the
// flag (and environment variable) that sets it.
var optionFlags = map[string]string{
	"Lock.Name":      "-" + agentflags.Lock,
	"Lock.Namespace": "-" + agentflags.Namespace + " (or $" + agentflags.PodNamespaceEnv + ")",
	"Identity":       "-" + agentflags.Identity + " (or $" + agentflags.PodNameEnv + ")",
	"OnLost":         "-" + agentflags.OnLost,
	"MaxConnections": "-" + agentflags.MaxConnections,
	"MaxLongPolls":   "-" + agentflags.MaxLongPolls,
	"Command":        "the command after --",
	"Health":         "-" + agentflags.Health,
	"HealthPeriod":   "-health-period",
	"StepDownAfter":  "-" + agentflags.StepDownAfter,
	"Fencing":        "-" + agentflags.Fencing,
}

// Command runs `redislock agent` with args until ctx ends. Flags that
// cannot work give a usage error (cli.ErrUsage) naming the flag, before
// the agent loads a kubeconfig or connects to anything.
func Command(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f := agentflags.Flags{Namespace: os.Getenv(agentflags.PodNamespaceEnv), Identity: os.Getenv(agentflags.PodNameEnv), HTTPAddress: agentflags.DefaultHTTPAddress, OnLost: OnLostExit,
		MaxConnections: DefaultMaxConnections, MaxLongPolls: DefaultMaxLongPolls}
	f.Bind(fs)
	kubeconfigPath := kubeconfig.Flag(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: redislock agent -lock NAME [flags] [-- CMD ARGS...]\n\nWith CMD, the agent runs it only while it leads, stops it when leadership ends, and exits with its exit code.\n\n")
		fs.PrintDefaults()
	}
	logFlags := cli.BindLogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	o := options(f, fs.Args())
	if err := o.validate(); err != nil {
		return cli.Usage(flagErrors(err))
	}
	log := logFlags.Logger()
	redisconn.RouteRedisLogs(log)
	o.Logger = log.WithName("agent")
	cfg, err := kubeconfig.Load(*kubeconfigPath)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a, err := New(cfg, o)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return a.Run(ctx)
}

// options are the Options that f and command (the arguments after --)
// give.
func options(f agentflags.Flags, command []string) Options {
	return Options{
		Lock:     types.NamespacedName{Namespace: f.Namespace, Name: f.Lock},
		Identity: f.Identity, Addr: f.HTTPAddress, ProbeAddr: f.ProbeAddress, MaxConnections: f.MaxConnections, MaxLongPolls: f.MaxLongPolls,
		LabelPod: f.LabelPod, LeaderFile: f.LeaderFile,
		ClusterID: f.ClusterID, Hook: f.Hook,
		Command: command, OnLost: onLostFlag(command, f.OnLost),
		Health: f.Health, HealthPeriod: f.HealthPeriod, StepDownAfter: f.StepDownAfter,
		Fencing: f.Fencing,
	}
}

// onLostFlag is -on-lost's value for Options: unset without a command, so
// that the flag's default does not count as setting it.
func onLostFlag(command []string, v string) string {
	if len(command) == 0 && v == OnLostExit {
		return ""
	}
	return v
}

// flagErrors restates the OptionErrors in err by the flags that set their
// fields, one line each, the last saying where the flags are listed.
func flagErrors(err error) error {
	var lines []string
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var oe *OptionError
		if errors.As(e, &oe) && optionFlags[oe.Field] != "" {
			lines = append(lines, fmt.Sprintf("agent: %s: %s", optionFlags[oe.Field], oe.Reason))
		} else {
			lines = append(lines, "agent: "+e.Error())
		}
	}
	return errors.New(strings.Join(lines, "\n") + " (redislock agent -h lists the flags)")
}
