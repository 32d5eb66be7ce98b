package webhookwait_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/pki"
	"github.com/redislock/redislock/internal/testing/syncbuf"
	"github.com/redislock/redislock/internal/webhookwait"
)

// realWebhook is the injection webhook's handler, as the controller serves
// it; the probe's pod has no annotation, so it reads nothing (nil reader).
func realWebhook(t *testing.T) http.Handler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wh, err := inject.NewWebhook(nil, scheme, inject.Agent{Image: "redislock:test", ClusterID: "cluster"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return &admission.Webhook{Handler: wh}
}

// serve starts a TLS server with h at inject.Path and returns Options for
// it: the URL under the certificate's name (example.com), connecting to
// the loopback address as the chart's Job connects to the ClusterIP, and
// the server's CA in a file.
func serve(t *testing.T, h http.Handler) webhookwait.Options {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(inject.Path, h)
	srv := httptest.NewUnstartedServer(mux)
	// The wrong-CA cases make it log each handshake the client refused.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return webhookwait.Options{
		URL: "https://example.com:" + port + inject.Path, Connect: host, CAFile: ca,
		Timeout: 3 * time.Second, Interval: 100 * time.Millisecond, AttemptTimeout: 500 * time.Millisecond,
	}
}

func run(t *testing.T, o webhookwait.Options) (string, time.Duration, error) {
	t.Helper()
	var out syncbuf.Buffer
	o.Log = &out
	start := time.Now()
	err := webhookwait.Wait(context.Background(), o)
	return out.String(), time.Since(start), err
}

func TestWaitReturnsOnceTheWebhookAllows(t *testing.T) {
	o := serve(t, realWebhook(t))
	log, d, err := run(t, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if strings.Contains(log, "attempt 1 ") || !strings.Contains(log, "allowed the probe after 1 attempts") {
		t.Errorf("want one attempt, which succeeded, logged; log:\n%s", log)
	}
	t.Logf("%.3fs:\n%s", d.Seconds(), log)
}

// Until the Service routes, attempts fail; each failure is logged with its
// reason, and the wait goes on.
func TestWaitLogsEachFailedAttemptAndGoesOn(t *testing.T) {
	real := realWebhook(t)
	var n atomic.Int32
	o := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "no endpoints available", http.StatusServiceUnavailable)
			return
		}
		real.ServeHTTP(w, r)
	}))
	log, _, err := run(t, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for _, want := range []string{"attempt 1 ", "attempt 2 ", "HTTP 503, not an AdmissionReview", "no endpoints available", "allowed the probe after 3 attempts"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestWaitFailsAtTheTimeoutWhenTheWebhookNeverAnswers(t *testing.T) {
	// The handler holds each request until the test ends (srv.Close
	// waits for handlers; a handler that has not read the body does not
	// see its client go away).
	done := make(chan struct{})
	o := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-done }))
	t.Cleanup(func() { close(done) })
	o.Timeout = 2 * time.Second
	log, d, err := run(t, o)
	if err == nil {
		t.Fatalf("a webhook that never answers: the wait succeeded\n%s", log)
	}
	if !strings.Contains(err.Error(), "did not allow the probe within 2s") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("error %q: want the timeout and the last attempt's reason", err)
	}
	if d < o.Timeout || d > o.Timeout+time.Second {
		t.Errorf("returned after %v, want about the timeout %v", d, o.Timeout)
	}
	if got := strings.Count(log, "attempt "); got < 2 {
		t.Errorf("%d failed attempts logged:\n%s", got, log)
	}
	t.Logf("%v after %.1fs", err, d.Seconds())
}

// Whatever answers must be the webhook allowing this probe: a refusal, an
// answer to another request, a proxy's page, or a certificate from another
// CA is not.
func TestWaitFailsOnAWrongAnswer(t *testing.T) {
	answer := func(f func(*admissionv1.AdmissionReview)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
			f(&review)
			_ = json.NewEncoder(w).Encode(&review)
		})
	}
	cases := []struct {
		name string
		h    http.Handler
		opts func(*webhookwait.Options)
		want string
	}{
		{"another UID", answer(func(r *admissionv1.AdmissionReview) { r.Response.UID = "other" }), nil, `uid "other" allowed true`},
		{"refused", answer(func(r *admissionv1.AdmissionReview) { r.Response.Allowed = false }), nil, "allowed false"},
		{"not a review", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, "<html>hello</html>") }), nil, "HTTP 200, not an AdmissionReview"},
		{"another CA", realWebhook(t), func(o *webhookwait.Options) {
			if err := os.WriteFile(o.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherCA(t)}), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "certificate signed by unknown authority"},
		{"another name", realWebhook(t), func(o *webhookwait.Options) {
			o.URL = strings.Replace(o.URL, "example.com", "redislock-webhook.redislock-system.svc", 1)
		}, "not redislock-webhook.redislock-system.svc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := serve(t, tc.h)
			o.Timeout = 500 * time.Millisecond
			if tc.opts != nil {
				tc.opts(&o)
			}
			log, _, err := run(t, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q\n%s", err, tc.want, log)
			}
			if !strings.Contains(log, tc.want) {
				t.Errorf("the failed attempts' log lacks %q:\n%s", tc.want, log)
			}
		})
	}
}

// otherCA is a self-signed CA certificate (DER) of a key of its own:
// httptest's servers all share one certificate.
func otherCA(t *testing.T) []byte {
	t.Helper()
	ca, err := pki.Issue(&x509.Certificate{
		Subject:   pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca.Cert.Raw
}

// A -connect the kubelet did not expand (no such Service env var) fails at
// once with the reason, not after the timeout.
func TestWaitFailsAtOnceOnAnUnsetServiceVariable(t *testing.T) {
	o := serve(t, realWebhook(t))
	o.Connect = "$(RL_REDISLOCK_WEBHOOK_SERVICE_HOST)"
	_, d, err := run(t, o)
	if err == nil || !strings.Contains(err.Error(), "the variable was not set") || d > time.Second {
		t.Errorf("after %v: %v", d, err)
	}
}

// Each duration flag that is not positive is named in its own message.
func TestWaitRejectsADurationThatIsNotPositive(t *testing.T) {
	for flag, set := range map[string]func(*webhookwait.Options){
		"-timeout":         func(o *webhookwait.Options) { o.Timeout = 0 },
		"-interval":        func(o *webhookwait.Options) { o.Interval = -time.Second },
		"-attempt-timeout": func(o *webhookwait.Options) { o.AttemptTimeout = 0 },
	} {
		o := serve(t, realWebhook(t))
		set(&o)
		_, _, err := run(t, o)
		if err == nil || !strings.Contains(err.Error(), flag+" ") || !strings.Contains(err.Error(), "want a positive duration") {
			t.Errorf("%s not positive: %v", flag, err)
		}
	}
}
