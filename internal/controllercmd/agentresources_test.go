package controllercmd

import (
	"context"
	"flag"
	"io"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/redislock/redislock/internal/inject"
)

// parseWebhookFlags binds the webhook flags and parses args.
func parseWebhookFlags(t *testing.T, args ...string) *webhookFlags {
	t.Helper()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var w webhookFlags
	w.bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &w
}

func quantities(l corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for k, v := range l {
		out[k] = v.String()
	}
	return out
}

func TestAgentResourceFlags(t *testing.T) {
	defaults := inject.DefaultResources()
	cases := map[string]struct {
		args           []string
		requests, lims map[corev1.ResourceName]string
	}{
		"no flags: the injector's defaults": {nil, quantities(defaults.Requests), quantities(defaults.Limits)},
		"each flag sets its quantity": {
			[]string{"-agent-cpu-request=20m", "-agent-memory-request=40Mi", "-agent-cpu-limit=500m", "-agent-memory-limit=1Gi"},
			map[corev1.ResourceName]string{"cpu": "20m", "memory": "40Mi"}, map[corev1.ResourceName]string{"cpu": "500m", "memory": "1Gi"},
		},
		"empty removes one": {
			[]string{"-agent-memory-limit=", "-agent-cpu-request="},
			map[corev1.ResourceName]string{"memory": "32Mi"}, map[corev1.ResourceName]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := parseWebhookFlags(t, tc.args...).agentResources()
			if err != nil {
				t.Fatal(err)
			}
			if got := quantities(r.Requests); !maps.Equal(got, tc.requests) {
				t.Errorf("requests %v, want %v", got, tc.requests)
			}
			if got := quantities(r.Limits); !maps.Equal(got, tc.lims) {
				t.Errorf("limits %v, want %v", got, tc.lims)
			}
		})
	}
}

func TestAgentResourceFlagsRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-agent-memory-limit=lots"}, `-agent-memory-limit="lots" is not a quantity`},
		{[]string{"-agent-cpu-request=-1"}, `-agent-cpu-request="-1" is not a quantity`},
		{[]string{"-agent-memory-request=256Mi"}, "-agent-memory-request=256Mi is above -agent-memory-limit=128Mi"},
		{[]string{"-agent-cpu-request=2", "-agent-cpu-limit=1"}, "-agent-cpu-request=2 is above -agent-cpu-limit=1"},
	} {
		_, err := parseWebhookFlags(t, tc.args...).agentResources()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one that says %q", tc.args, err, tc.want)
		}
	}
}

// The controller refuses to start with a bad quantity, before it connects
// anywhere.
func TestControllerStopsOnABadAgentResource(t *testing.T) {
	err := Run(context.Background(), []string{"-agent-memory-limit=128MB!", "-kubeconfig=/nonexistent"})
	if err == nil || !strings.Contains(err.Error(), "-agent-memory-limit") {
		t.Fatalf("Run: %v, want the error naming -agent-memory-limit", err)
	}
}
