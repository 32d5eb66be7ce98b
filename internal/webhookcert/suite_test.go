package webhookcert_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/internal/webhookcert"
)

// k8s is an uncached client of the test API server, for the Managers under
// test and for the assertions.
var k8s client.Client

func TestMain(m *testing.M) {
	testenv.Main(filepath.Join("..", ".."), &envtest.Environment{}, false, func(cfg *rest.Config) (int, error) {
		var err error
		if k8s, err = client.New(cfg, client.Options{}); err != nil {
			return 0, err
		}
		return m.Run(), nil
	})
}

const namespace = "default"

// hosts are the serving certificate's SANs in these tests: a DNS name and
// the IP address the TLS tests listen on.
var hosts = []string{"webhook.default.svc", "127.0.0.1"}

var fixtures atomic.Int64

// newFixture creates a MutatingWebhookConfiguration with two webhooks and
// returns Options naming it, a Secret no other test uses and an empty
// CertDir, with the clock clk.
func newFixture(t *testing.T, clk clock.Clock) webhookcert.Options {
	t.Helper()
	name := fmt.Sprintf("webhookcert-%d", fixtures.Add(1))
	createWebhookConfig(t, name)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	})
	return webhookcert.Options{
		Namespace: namespace, SecretName: name, WebhookConfigName: name,
		Hosts: hosts, CertDir: t.TempDir(), Clock: clk,
	}
}

// createWebhookConfig creates a MutatingWebhookConfiguration with two
// webhooks that match no request and have no caBundle.
func createWebhookConfig(t *testing.T, name string) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	webhook := func(n string) admissionregistrationv1.MutatingWebhook {
		url := "https://127.0.0.1:9443/" + n
		return admissionregistrationv1.MutatingWebhook{
			Name:                    n + ".redislock.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{webhook("first"), webhook("second")},
	}
	if err := k8s.Create(t.Context(), cfg); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cfg) })
}

// newClock returns a clock at the current time that moves only when a
// test steps it, which tests do between passes only.
func newClock() *testingclock.FakeClock { return testingclock.NewFakeClock(time.Now()) }

func newManager(t *testing.T, o webhookcert.Options) *webhookcert.Manager {
	t.Helper()
	m, err := webhookcert.New(k8s, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func ensure(t *testing.T, m *webhookcert.Manager) {
	t.Helper()
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
}

func getSecret(t *testing.T, o webhookcert.Options) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, &s); err != nil {
		t.Fatalf("get secret: %v", err)
	}
	return &s
}

func getConfig(t *testing.T, o webhookcert.Options) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: o.WebhookConfigName}, &cfg); err != nil {
		t.Fatalf("get webhook configuration: %v", err)
	}
	return &cfg
}

// bundleOf returns the caBundle that every webhook of the configuration
// holds, failing the test unless they all hold the same one.
func bundleOf(t *testing.T, o webhookcert.Options) []byte {
	t.Helper()
	cfg := getConfig(t, o)
	for _, w := range cfg.Webhooks[1:] {
		if string(w.ClientConfig.CABundle) != string(cfg.Webhooks[0].ClientConfig.CABundle) {
			t.Fatalf("webhooks hold different caBundles: %s and %s", cfg.Webhooks[0].Name, w.Name)
		}
	}
	return cfg.Webhooks[0].ClientConfig.CABundle
}

// readFile returns the content of CertDir's file name.
func readFile(t *testing.T, o webhookcert.Options, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.CertDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseCerts parses every certificate of a PEM bundle.
func parseCerts(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("parse bundle: %v", err)
		}
		certs = append(certs, c)
	}
	return certs
}

// verify checks that certPEM is valid at time at for every one of hosts,
// trusting only bundle.
func verify(t *testing.T, certPEM, bundle []byte, at time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("caBundle holds no certificate")
	}
	leaf := parseCerts(t, certPEM)[0]
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, CurrentTime: at}); err != nil {
			t.Errorf("certificate does not verify for %s against the caBundle: %v", h, err)
		}
	}
}

// eventually calls cond, at once and then every 20ms, until it returns
// nil, failing the test with its last error if that takes longer than
// timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("not within %v: %v", timeout, last)
	}
}
