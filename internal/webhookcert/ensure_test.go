package webhookcert_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/internal/webhookcert"
)

func TestFirstEnsureCreatesSecretFilesAndCABundle(t *testing.T) {
	clk := newClock()
	o := newFixture(t, clk)
	ensure(t, newManager(t, o))

	s := getSecret(t, o)
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("secret type = %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("secret has no %s", k)
		}
	}
	if _, ok := s.Data["ca-previous.crt"]; ok {
		t.Error("a new secret has a previous CA")
	}
	crt, key := readFile(t, o, "tls.crt"), readFile(t, o, "tls.key")
	if string(crt) != string(s.Data["tls.crt"]) || string(key) != string(s.Data["tls.key"]) {
		t.Error("files differ from the secret")
	}
	if mode := statFiles(t, o)["tls.key"].Mode().Perm(); mode != 0o600 {
		t.Errorf("tls.key has mode %v, want 0600", mode)
	}
	bundle := bundleOf(t, o)
	if string(bundle) != string(s.Data["ca.crt"]) {
		t.Error("caBundle is not the secret's CA")
	}
	verify(t, crt, bundle, clk.Now())

	// The documented default lifetimes, backdated by an hour.
	for _, c := range []struct {
		name string
		pem  []byte
		want time.Duration
	}{{"CA", s.Data["ca.crt"], 10 * 365 * 24 * time.Hour}, {"serving certificate", crt, 365 * 24 * time.Hour}} {
		x := parseCerts(t, c.pem)[0]
		if got := x.NotAfter.Sub(x.NotBefore) - time.Hour; got != c.want {
			t.Errorf("%s lives %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSecondEnsureChangesNothing(t *testing.T) {
	o := newFixture(t, newClock())
	m := newManager(t, o)
	ensure(t, m)
	secretRV, configRV := getSecret(t, o).ResourceVersion, getConfig(t, o).ResourceVersion
	before := statFiles(t, o)

	ensure(t, m)
	ensure(t, newManager(t, o)) // a replica that just started, with the same cert dir

	if rv := getSecret(t, o).ResourceVersion; rv != secretRV {
		t.Errorf("secret resourceVersion %s -> %s", secretRV, rv)
	}
	if rv := getConfig(t, o).ResourceVersion; rv != configRV {
		t.Errorf("webhook configuration resourceVersion %s -> %s", configRV, rv)
	}
	for name, fi := range statFiles(t, o) {
		if !os.SameFile(fi, before[name]) || !fi.ModTime().Equal(before[name].ModTime()) {
			t.Errorf("%s was rewritten", name)
		}
	}
}

func statFiles(t *testing.T, o webhookcert.Options) map[string]os.FileInfo {
	t.Helper()
	out := map[string]os.FileInfo{}
	for _, name := range []string{"tls.crt", "tls.key"} {
		fi, err := os.Stat(filepath.Join(o.CertDir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = fi
	}
	return out
}

func TestEnsureRepairsGarbageServingCert(t *testing.T) {
	clk := newClock()
	o := newFixture(t, clk)
	m := newManager(t, o)
	ensure(t, m)
	s := getSecret(t, o)
	ca := s.Data["ca.crt"]
	s.Data["tls.crt"] = []byte("garbage")
	if err := k8s.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}

	ensure(t, m)

	s = getSecret(t, o)
	if string(s.Data["ca.crt"]) != string(ca) {
		t.Error("the CA was replaced, though only the serving certificate was broken")
	}
	crt := readFile(t, o, "tls.crt")
	if string(crt) != string(s.Data["tls.crt"]) {
		t.Error("tls.crt differs from the secret")
	}
	verify(t, crt, bundleOf(t, o), clk.Now())
}

func TestReplicasRacingConvergeOnOneCertificate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, o webhookcert.Options)
	}{
		{"no secret", func(*testing.T, webhookcert.Options) {}},
		{"garbage serving certificate", func(t *testing.T, o webhookcert.Options) {
			if err := k8s.Create(t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": []byte("garbage")},
			}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			o := newFixture(t, clk)
			tc.setup(t, o)
			replicas := make([]webhookcert.Options, 2)
			errs := make([]error, len(replicas))
			var wg sync.WaitGroup
			for i := range replicas {
				replicas[i] = o
				replicas[i].CertDir = t.TempDir()
				m := newManager(t, replicas[i])
				wg.Go(func() { errs[i] = m.Ensure(t.Context()) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			s := getSecret(t, o)
			for i, r := range replicas {
				if string(readFile(t, r, "tls.crt")) != string(s.Data["tls.crt"]) ||
					string(readFile(t, r, "tls.key")) != string(s.Data["tls.key"]) {
					t.Errorf("replica %d's files differ from the secret", i)
				}
			}
			verify(t, s.Data["tls.crt"], bundleOf(t, o), clk.Now())
		})
	}
}

func TestEnsureWithoutWebhookConfigReportsItAndStillWritesFiles(t *testing.T) {
	o := newFixture(t, newClock())
	o.WebhookConfigName = "no-such-configuration"

	err := newManager(t, o).Ensure(t.Context())

	if !errors.Is(err, webhookcert.ErrWebhookConfigNotFound) || !strings.Contains(err.Error(), o.WebhookConfigName) {
		t.Fatalf("Ensure = %v, want ErrWebhookConfigNotFound naming %s", err, o.WebhookConfigName)
	}
	if string(readFile(t, o, "tls.crt")) != string(getSecret(t, o).Data["tls.crt"]) {
		t.Error("tls.crt differs from the secret")
	}
}
