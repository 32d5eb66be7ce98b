// Package agentflags is the command line of `redislock agent`: the one
// place that names its flags, for the agent that parses them and for the
// webhook that writes them into the pods it injects.
package agentflags

import (
	"flag"
	"time"
)

// The agent's HTTP port and the environment variables that give its pod's
// name and namespace: the webhook sets them in the pods it injects, and the
// agent defaults to them.
const (
	// Port is the agent's HTTP port unless the pod's annotation says
	// otherwise; DefaultHTTPAddress listens on it on every address.
	Port               = 8090
	DefaultHTTPAddress = ":8090"
	// PodNameEnv and PodNamespaceEnv hold the pod's name (the agent's
	// default identity) and namespace (its lock's default namespace).
	PodNameEnv      = "POD_NAME"
	PodNamespaceEnv = "POD_NAMESPACE"
	// ContainerName is the agent's container in the pods the webhook
	// injects: the agent does not count its own readiness as its app's.
	ContainerName = "redislock-agent"
)

// The names of the flags that the agent's usage errors name too.
const (
	Lock      = "lock"
	Namespace = "namespace"
	Identity  = "identity"
	OnLost    = "on-lost"
	// Health and StepDownAfter gate leadership on the app's health.
	Health        = "health"
	StepDownAfter = "step-down-after"
	// Fencing makes the agent lead only once the API server shows it as
	// the holder.
	Fencing = "fencing"
	// MaxConnections and MaxLongPolls bound what clients can hold of the
	// agent's HTTP servers.
	MaxConnections = "max-connections"
	MaxLongPolls   = "max-long-polls"
)

// Flags are the options of `redislock agent` that its flags set, and the
// one place that names those flags: Bind declares them on a flag set, and
// Args writes the arguments that set them, so that a command line written
// for the agent (the webhook's) and the agent's parser cannot drift apart.
type Flags struct {
	Lock           string
	Namespace      string
	Identity       string
	HTTPAddress    string
	ProbeAddress   string
	MaxConnections int
	MaxLongPolls   int
	LabelPod       bool
	LeaderFile     string
	ClusterID      string
	Hook           string
	OnLost         string
	Health         string
	HealthPeriod   time.Duration
	StepDownAfter  time.Duration
	Fencing        bool
}

// Bind declares the flags on fs, each defaulting to f's value and parsed
// into f.
func (f *Flags) Bind(fs *flag.FlagSet) {
	fs.StringVar(&f.Lock, Lock, f.Lock, "name of the RedisLock to campaign for (required)")
	fs.StringVar(&f.Namespace, Namespace, f.Namespace, "namespace of the RedisLock and of this pod (default $POD_NAMESPACE)")
	fs.StringVar(&f.Identity, Identity, f.Identity, "this candidate's identity, the pod's name (default $POD_NAME)")
	fs.StringVar(&f.HTTPAddress, "http-address", f.HTTPAddress, "listen address of /leader, /healthz and /metrics")
	fs.StringVar(&f.ProbeAddress, "probe-address", f.ProbeAddress, "listen address of a second server of /healthz and /metrics alone, without /leader: for the kubelet and Prometheus when -http-address is a loopback address, as in 127.0.0.1:8090 (default: none)")
	fs.IntVar(&f.MaxConnections, MaxConnections, f.MaxConnections, "connections each HTTP server holds open at once; more wait, not accepted, in the kernel's listen queue (each costs about 21 KiB of memory)")
	fs.IntVar(&f.MaxLongPolls, MaxLongPolls, f.MaxLongPolls, "long polls of /leader held at once, below -"+MaxConnections+"; one more is answered at once with the current status and Retry-After: 1")
	fs.BoolVar(&f.LabelPod, "label-pod", f.LabelPod, "keep the pod label redislock.io/leader=true|false current (needs patch on pods)")
	fs.StringVar(&f.LeaderFile, "leader-file", f.LeaderFile, "keep the /leader JSON in this file, rewritten on changes and renewals")
	fs.StringVar(&f.ClusterID, "cluster-id", f.ClusterID, "this cluster's identity, the UID of namespace kube-system, for a lock of scope Cluster (default: read it, which needs get on that namespace)")
	fs.StringVar(&f.Hook, "hook", f.Hook, "a program to run on each change of leadership or holder (or of a sharded lock's shards), with the /leader JSON on its stdin and REDISLOCK_LEADING=true|false")
	fs.StringVar(&f.Health, Health, f.Health, "gate leadership on the app's health: http://HOST:PORT/PATH (healthy on a status from 200 to 399), file:/PATH (healthy while it exists) or ready (while the pod's app containers are Ready: a watch of the pod, which needs list and watch on pods); the agent campaigns only while it is healthy, and steps down (releases) once it has been unhealthy for -"+StepDownAfter)
	fs.DurationVar(&f.HealthPeriod, "health-period", f.HealthPeriod, "how often to check -"+Health+" (default 1s; not with ready, which is watched)")
	fs.DurationVar(&f.StepDownAfter, StepDownAfter, f.StepDownAfter, "how long a leader may stay unhealthy before it steps down (default: the lock's ttl)")
	fs.BoolVar(&f.Fencing, Fencing, f.Fencing, "lead (report it, run the command) only once the RedisLock's status names this pod as the holder, which the admission policy redislock-fencing admits the pod's writes by; the RedisLock is read with backoff up to its renewInterval (at least 500ms) meanwhile")
	fs.StringVar(&f.OnLost, OnLost, f.OnLost, "with a command after --: what to do when leadership ends, once the command is stopped: exit, or campaign to run it again at the next term")
}

// Args are the arguments, one -name=value each in the flags' name order,
// that set every field of f that is not its zero value: parsed by a flag
// set that Bind declared on a zero Flags, they give f back.
func (f Flags) Args() []string {
	var zero Flags
	defaults, values := flag.NewFlagSet("", flag.ContinueOnError), flag.NewFlagSet("", flag.ContinueOnError)
	zero.Bind(defaults)
	f.Bind(values)
	var args []string
	values.VisitAll(func(v *flag.Flag) {
		if v.DefValue != defaults.Lookup(v.Name).DefValue {
			args = append(args, "-"+v.Name+"="+v.DefValue)
		}
	})
	return args
}
