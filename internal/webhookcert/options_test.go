package webhookcert_test

import (
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/webhookcert"
)

func TestNewRejectsEachBrokenRule(t *testing.T) {
	valid := webhookcert.Options{
		Namespace: "ns", SecretName: "s", WebhookConfigName: "w",
		Hosts: []string{"webhook.ns.svc"}, CertDir: "/tmp/certs",
	}
	for _, tc := range []struct {
		name   string
		client client.Client
		change func(*webhookcert.Options)
		want   string
	}{
		{"nil client", nil, func(*webhookcert.Options) {},
			"webhookcert: invalid options: client is nil"},
		{"no namespace", k8s, func(o *webhookcert.Options) { o.Namespace = "" },
			"webhookcert: invalid options: Namespace is required"},
		{"no secret name", k8s, func(o *webhookcert.Options) { o.SecretName = "" },
			"webhookcert: invalid options: SecretName is required"},
		{"no webhook configuration", k8s, func(o *webhookcert.Options) { o.WebhookConfigName = "" },
			"webhookcert: invalid options: WebhookConfigName is required"},
		{"no hosts", k8s, func(o *webhookcert.Options) { o.Hosts = nil },
			"webhookcert: invalid options: Hosts needs at least one entry"},
		{"empty host", k8s, func(o *webhookcert.Options) { o.Hosts = []string{"a.svc", ""} },
			"webhookcert: invalid options: Hosts has an empty entry"},
		{"no cert dir", k8s, func(o *webhookcert.Options) { o.CertDir = "" },
			"webhookcert: invalid options: CertDir is required"},
		{"negative duration", k8s, func(o *webhookcert.Options) { o.CheckInterval = -time.Second },
			"webhookcert: invalid options: durations must not be negative (CAValidity 87600h0m0s, CertValidity 8760h0m0s, CheckInterval -1s)"},
		{"cert outlives CA", k8s, func(o *webhookcert.Options) { o.CAValidity, o.CertValidity = time.Hour, 2*time.Hour },
			"webhookcert: invalid options: CertValidity (2h0m0s) must not exceed CAValidity (1h0m0s)"},
		{"cert outlives default CA", k8s, func(o *webhookcert.Options) { o.CertValidity = 20 * 365 * 24 * time.Hour },
			"webhookcert: invalid options: CertValidity (175200h0m0s) must not exceed CAValidity (87600h0m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.change(&o)
			m, err := webhookcert.New(tc.client, o)
			if !errors.Is(err, webhookcert.ErrInvalidOptions) || err.Error() != tc.want {
				t.Fatalf("New = %v, %v; want error %q", m, err, tc.want)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		if _, err := webhookcert.New(k8s, valid); err != nil {
			t.Fatalf("New: %v", err)
		}
	})
}
