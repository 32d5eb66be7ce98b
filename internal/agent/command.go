package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/kubeconfig"
	"github.com/redislock/redislock/internal/redisconn"
)

// optionFlags name, for each Options field that the agent's flags set, the
// flag (and environment variable) that sets it.
var optionFlags = map[string]string{
	"Lock.Name":      "-lock",
	"Lock.Namespace": "-namespace (or $POD_NAMESPACE)",
	"Identity":       "-identity (or $POD_NAME)",
	"OnLost":         "-on-lost",
	"Command":        "the command after --",
}

// Command runs `redislock agent` with args until ctx ends. Flags that
// cannot work give a usage error (cli.ErrUsage) naming the flag, before
// the agent loads a kubeconfig or connects to anything.
func Command(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	lock := fs.String("lock", "", "name of the RedisLock to campaign for (required)")
	namespace := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace of the RedisLock and of this pod (default $POD_NAMESPACE)")
	identity := fs.String("identity", os.Getenv("POD_NAME"), "this candidate's identity, the pod's name (default $POD_NAME)")
	addr := fs.String("http-address", DefaultAddr, "listen address of /leader, /healthz and /metrics")
	labelPod := fs.Bool("label-pod", false, "keep the pod label "+LeaderLabel+"=true|false current (needs patch on pods)")
	leaderFile := fs.String("leader-file", "", "keep the /leader JSON in this file, rewritten on changes and renewals")
	kubeconfigPath := kubeconfig.Flag(fs)
	clusterID := fs.String("cluster-id", "", "this cluster's identity, the UID of namespace kube-system, for a lock of scope Cluster (default: read it, which needs get on that namespace)")
	hook := fs.String("hook", "", "a program to run on each change of leadership or holder, with the /leader JSON on its stdin and REDISLOCK_LEADING=true|false")
	onLost := fs.String("on-lost", OnLostExit, "with a command after --: what to do when leadership ends, once the command is stopped: exit, or campaign to run it again at the next term")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: redislock agent -lock NAME [flags] [-- CMD ARGS...]\n\nWith CMD, the agent runs it only while it leads, stops it when leadership ends, and exits with its exit code.\n\n")
		fs.PrintDefaults()
	}
	logFlags := cli.BindLogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	o := Options{
		Lock:     types.NamespacedName{Namespace: *namespace, Name: *lock},
		Identity: *identity, Addr: *addr, LabelPod: *labelPod, LeaderFile: *leaderFile,
		ClusterID: *clusterID, Hook: *hook,
		Command: fs.Args(), OnLost: onLostFlag(fs.Args(), *onLost),
	}
	if err := o.validate(); err != nil {
		var oe *OptionError
		if errors.As(err, &oe) && optionFlags[oe.Field] != "" {
			return cli.Usagef("agent: %s: %s (redislock agent -h lists the flags)", optionFlags[oe.Field], oe.Reason)
		}
		return cli.Usage(err)
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

// onLostFlag is -on-lost's value for Options: unset without a command, so
// that the flag's default does not count as setting it.
func onLostFlag(command []string, v string) string {
	if len(command) == 0 && v == OnLostExit {
		return ""
	}
	return v
}
