package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// demoStepTimeout bounds each command of the demo.
const demoStepTimeout = 2 * time.Minute

// demo is `make demo CLUSTER=1`: the story of test/cluster told with the
// commands a user types, on a cluster it brings up (and down, unless keep,
// or unless one was already up). Once ctx ends (Ctrl-C) the command running
// is stopped and a cluster the demo brought up goes down, keep or not.
func demo(ctx context.Context, d dirs, keep bool) (err error) {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	s, err := d.readState()
	if err != nil || !alive(s.Pid) {
		if err := up(ctx, d); err != nil {
			return err
		}
		defer func() {
			if !keep || ctx.Err() != nil {
				err = errors.Join(err, down(d))
			}
		}()
		if s, err = d.readState(); err != nil {
			return err
		}
	}
	dm, err := newDemo(ctx, root, d, s)
	if err != nil {
		return err
	}
	const ns, app = "shop", "worker"
	workload, err := dm.workload(ns, app)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error {
			return dm.run("", "helm", "install", "rl", "charts/redislock", "-n", "redislock-system", "--create-namespace", "--wait", "--timeout", "2m",
				"--set", "leaderElection.mode=redislock", "--set", "redis.addrs={"+s.RedisAddr+"}")
		},
		// The chart's webhook-wait hook holds the install until the
		// webhook answers through its Service: the workload can go at once.
		func() error { return dm.run(workload, "kubectl", "apply", "-f", "-") },
		func() error {
			return dm.run("", "kubectl", "-n", ns, "rollout", "status", "deployment/"+app, "--timeout=2m")
		},
		func() error { return dm.untilLeader(ns, "app="+app, "") },
		func() error { return dm.run("", "kubectl", "-n", ns, "get", "pods", "-L", "redislock.io/leader") },
		func() error { return dm.run("", "kubectl", "get", "redislocks", "-A") },
		func() error {
			leader, err := dm.out("kubectl", "-n", ns, "get", "pods", "-l", "redislock.io/leader=true", "-o", "name")
			if err != nil {
				return err
			}
			if err := dm.run("", "kubectl", "-n", ns, "delete", leader, "--wait=false"); err != nil {
				return err
			}
			return dm.untilLeader(ns, "app="+app, strings.TrimPrefix(leader, "pod/"))
		},
		func() error { return dm.run("", "kubectl", "-n", ns, "get", "pods", "-L", "redislock.io/leader") },
		func() error {
			// The controller reflects the holder into the status shortly
			// after the lock is taken.
			var holder string
			if err := dm.until("the controller's RedisLock names its holder", func() bool {
				holder = dm.holder()
				return holder != ""
			}); err != nil {
				return err
			}
			if err := dm.run("", "kubectl", "-n", "redislock-system", "delete", "pod", holder, "--wait=false"); err != nil {
				return err
			}
			return dm.until("the controller's lock moves to the other replica", func() bool {
				next := dm.holder()
				return next != "" && next != holder
			})
		},
		func() error { return dm.run("", "kubectl", "get", "redislocks", "-A") },
	}
	for _, step := range steps {
		err := step()
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted (%w)", ctx.Err())
		}
		if err != nil {
			return err
		}
	}
	if keep {
		fmt.Printf("# kept running: export KUBECONFIG=%s; go run ./hack/cluster down stops it\n", s.Kubeconfig)
	}
	return nil
}

type demoRun struct {
	ctx     context.Context // ends with the demo (Ctrl-C)
	root    string
	state   *State
	tools   map[string]string
	env     []string
	started time.Time
}

func newDemo(ctx context.Context, root string, d dirs, s *State) (*demoRun, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "ensure-tools.sh"), "--print", "envtest", "helm").Output()
	if err != nil {
		return nil, fmt.Errorf("hack/ensure-tools.sh: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return nil, fmt.Errorf("hack/ensure-tools.sh printed %q", out)
	}
	cache := d.path("demo-cache")
	return &demoRun{
		ctx: ctx, root: root, state: s, started: time.Now(),
		tools: map[string]string{"kubectl": filepath.Join(f[0], "kubectl"), "helm": f[1]},
		env: []string{"KUBECONFIG=" + s.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(cache, "kube"),
			"HELM_CACHE_HOME=" + filepath.Join(cache, "helm"), "HELM_CONFIG_HOME=" + filepath.Join(cache, "helm-config"), "HELM_DATA_HOME=" + filepath.Join(cache, "helm-data")},
	}, nil
}

func (dm *demoRun) workload(ns, app string) (string, error) {
	tmpl, err := template.ParseFiles(filepath.Join(dm.root, "test", "cluster", "testdata", "workload.yaml"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = tmpl.Execute(&b, map[string]string{"NS": ns, "App": app, "RedisAddr": dm.state.RedisAddr, "AppImage": dm.state.AppImage})
	return b.String(), err
}

func (dm *demoRun) command(ctx context.Context, stdin, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, dm.tools[tool], args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dm.root, append(os.Environ(), dm.env...), strings.NewReader(stdin)
	return cmd
}

// run prints the command as a user types it, then its output.
func (dm *demoRun) run(stdin, tool string, args ...string) error {
	fmt.Printf("\n$ %s %s%s\n", tool, strings.Join(args, " "), map[bool]string{true: " <<< test/cluster/testdata/workload.yaml"}[stdin != ""])
	ctx, cancel := context.WithTimeout(dm.ctx, demoStepTimeout)
	defer cancel()
	cmd := dm.command(ctx, stdin, tool, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", tool, strings.Join(args, " "), err)
	}
	fmt.Printf("# %.1fs\n", time.Since(start).Seconds())
	return nil
}

func (dm *demoRun) out(tool string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(dm.ctx, demoStepTimeout)
	defer cancel()
	out, err := dm.command(ctx, "", tool, args...).Output()
	return strings.TrimSpace(string(out)), err
}

func (dm *demoRun) holder() string {
	h, _ := dm.out("kubectl", "-n", "redislock-system", "get", "redislock", "rl-redislock-leader", "-o", "jsonpath={.status.holderIdentity}")
	return h
}

// until polls cond every 100ms, within demoStepTimeout, and says how long
// what took.
func (dm *demoRun) until(what string, cond func() bool) error {
	start := time.Now()
	if err := dm.poll(cond); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Printf("# %s: %.2fs\n", what, time.Since(start).Seconds())
	return nil
}

// poll calls cond every 100ms until it is true, for at most
// demoStepTimeout, or until the demo ends.
func (dm *demoRun) poll(cond func() bool) error {
	ctx, cancel := context.WithTimeout(dm.ctx, demoStepTimeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			if dm.ctx.Err() != nil {
				return dm.ctx.Err()
			}
			return fmt.Errorf("not within %v", demoStepTimeout)
		case <-t.C:
		}
	}
	return nil
}

// untilLeader polls until one pod other than not carries the leader label.
func (dm *demoRun) untilLeader(ns, selector, not string) error {
	start := time.Now()
	var leader string
	err := dm.poll(func() bool {
		out, err := dm.out("kubectl", "-n", ns, "get", "pods", "-l", selector+",redislock.io/leader=true",
			"-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{" "}{end}`)
		// One labelled pod, not terminating (name=, no deletion time).
		f := strings.Fields(out)
		if err == nil && len(f) == 1 && f[0] != not+"=" && strings.HasSuffix(f[0], "=") {
			leader = strings.TrimSuffix(f[0], "=")
			return true
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("no single leader among %s: %w", selector, err)
	}
	fmt.Printf("# leader: %s, labelled %.2fs after the last step\n", leader, time.Since(start).Seconds())
	return nil
}
