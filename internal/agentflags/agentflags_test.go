package agentflags_test

import (
	"flag"
	"slices"
	"testing"

	"github.com/redislock/redislock/internal/agentflags"
)

// Args, parsed by the flag set Bind declares, give the Flags back; a zero
// field gives no argument.
func TestArgsParseBackIntoTheFlags(t *testing.T) {
	for _, want := range []agentflags.Flags{
		{},
		{Lock: "orders", HTTPAddress: ":8091", LabelPod: true, LeaderFile: "/var/run/redislock/leader.json", ClusterID: "c1"},
		{Lock: "l", Namespace: "shop", Identity: "pod-0", Hook: "/bin/hook", OnLost: "campaign"},
		{Lock: "l", HTTPAddress: "127.0.0.1:8090", ProbeAddress: ":8091", MaxConnections: 64, MaxLongPolls: 16},
	} {
		args := want.Args()
		var got agentflags.Flags
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		got.Bind(fs)
		if err := fs.Parse(append(args, "--", "cmd")); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got != want || !slices.Equal(fs.Args(), []string{"cmd"}) {
			t.Errorf("%q parsed into %+v and %q, want %+v and [cmd]", args, got, fs.Args(), want)
		}
	}
	if args := (agentflags.Flags{}).Args(); len(args) != 0 {
		t.Errorf("zero Flags give %q, want no arguments", args)
	}
	if args := (agentflags.Flags{Lock: "l", LabelPod: true}).Args(); !slices.Equal(args, []string{"-label-pod=true", "-lock=l"}) {
		t.Errorf("Args = %q, want -label-pod=true -lock=l", args)
	}
}

// Bind's defaults are the fields' values, so a caller sets defaults (the
// agent's from its environment) by filling them in first.
func TestBindDefaultsToTheFields(t *testing.T) {
	f := agentflags.Flags{Namespace: "from-env", HTTPAddress: ":8090"}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse([]string{"-" + agentflags.Lock + "=l"}); err != nil {
		t.Fatal(err)
	}
	if f != (agentflags.Flags{Lock: "l", Namespace: "from-env", HTTPAddress: ":8090"}) {
		t.Errorf("parsed %+v", f)
	}
}
