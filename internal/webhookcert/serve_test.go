package webhookcert_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

func TestServesTLSTrustedThroughCABundleAndReloadsRenewals(t *testing.T) {
	o := newFixture(t, clock.RealClock{}) // the HTTPS client checks against the real time
	ensure(t, newManager(t, o))

	// controller-runtime's webhook server serves through a CertWatcher.
	cw, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cw.Start(t.Context()) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}),
		TLSConfig:         &tls.Config{GetCertificate: cw.GetCertificate},
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // the handshake the untrusting client fails
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer func() { _ = srv.Close() }()
	url := "https://" + ln.Addr().String()

	get := func(serverName string, roots *x509.CertPool) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("body %q, want ok", body)
		}
		return err
	}
	trusted := x509.NewCertPool()
	if !trusted.AppendCertsFromPEM(bundleOf(t, o)) {
		t.Fatal("caBundle holds no certificate")
	}
	for _, h := range hosts {
		if err := get(h, trusted); err != nil {
			t.Errorf("request as %s, trusting the caBundle: %v", h, err)
		}
	}
	var unknown x509.UnknownAuthorityError
	if err := get("127.0.0.1", x509.NewCertPool()); !errors.As(err, &unknown) {
		t.Errorf("request trusting no CA = %v, want x509.UnknownAuthorityError", err)
	}

	// A replica with one more host reissues the certificate; the running
	// server picks it up from the files.
	o.Hosts = append(slices.Clone(hosts), "webhook-v2.default.svc")
	ensure(t, newManager(t, o))
	eventually(t, 10*time.Second, func() error { return get("webhook-v2.default.svc", trusted) })
}
