// Package tenantacl is the `redislock tenant-acl` command: it prints the
// Redis ACL rules of a namespace's user on a ClusterRedisConnection with a
// tenantSecretName (see redisconn.TenantACL), one per line, for
//
//	redislock tenant-acl -namespace shop | xargs -d '\n' redis-cli ACL SETUSER redislock-shop reset on ">$PASSWORD"
package tenantacl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/kubeconfig"
	"github.com/redislock/redislock/pkg/redisconn"
)

// Name is the command's name.
const Name = "tenant-acl"

// globals collects each -global flag.
type globals []string

func (g *globals) String() string     { return strings.Join(*g, ",") }
func (g *globals) Set(v string) error { *g = append(*g, v); return nil }

// Command runs `redislock tenant-acl` with args, printing to out. Without
// -cluster-id it reads the cluster's identity (kube-system's UID) through
// the kubeconfig.
func Command(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	namespace := fs.String("namespace", "", "the namespace whose locks the user may campaign for (required)")
	clusterID := fs.String("cluster-id", "", "the cluster's identity, the UID of its kube-system namespace (default: read through the kubeconfig)")
	var g globals
	fs.Var(&g, "global", "a Global lock name (spec.lockName of a lock of scope Global) the user may campaign for; repeat for more")
	path := kubeconfig.Flag(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: redislock %s -namespace NS [-cluster-id UID] [-global NAME]...\n\n"+
			"Prints, one per line, the ACL rules of the Redis user of namespace NS on a\n"+
			"ClusterRedisConnection with spec.tenantSecretName: its locks' keys and\n"+
			"channels, the Global names given, and the commands a candidate sends.\n\n", Name)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case *namespace == "":
		return cli.Usagef("%s: -namespace is required", Name)
	case fs.NArg() > 0:
		return cli.Usagef("%s: takes no arguments; got %q", Name, fs.Args())
	}
	if *clusterID == "" {
		cfg, err := kubeconfig.Load(*path)
		if err != nil {
			return fmt.Errorf("%s: -cluster-id not given: %w", Name, err)
		}
		c, err := redisconn.NewAPIClient(cfg)
		if err != nil {
			return err
		}
		if *clusterID, err = redisconn.ClusterID(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", Name, err)
		}
	}
	for _, r := range redisconn.TenantACL(*clusterID, *namespace, g) {
		if _, err := fmt.Fprintln(out, r); err != nil {
			return err
		}
	}
	return nil
}
