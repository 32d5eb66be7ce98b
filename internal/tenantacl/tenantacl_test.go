package tenantacl

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/pkg/redisconn"
)

// The command prints redisconn.TenantACL's rules, one per line, with each
// -global; a command line without -namespace, or with arguments, is a
// usage error.
func TestCommandPrintsTheRulesOnePerLine(t *testing.T) {
	var out bytes.Buffer
	err := Command(context.Background(), []string{"-namespace", "shop", "-cluster-id", "uid", "-global", "orders", "-global", "pay"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if want := redisconn.TenantACL("uid", "shop", []string{"orders", "pay"}); !slices.Equal(got, want) {
		t.Fatalf("printed %q; want %q", got, want)
	}
	for _, args := range [][]string{{"-cluster-id", "uid"}, {"-namespace", "shop", "-cluster-id", "uid", "extra"}, {"-namespace"}} {
		if err := Command(context.Background(), args, &out); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v; want a usage error", args, err)
		}
	}
}
