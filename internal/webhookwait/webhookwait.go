// Package webhookwait is `redislock webhook-wait`: it waits until the
// injection webhook answers through its Service, as the API server calls
// it, so that `helm install --wait` (whose post-install hook Job runs it)
// returns only once an annotated pod gets the agent. A Ready controller
// pod is not enough: kube-proxy routes the Service to it a moment later,
// and a pod created in that moment is refused (failurePolicy Fail) or,
// with Ignore, starts without the agent.
//
// Each attempt POSTs inject.ProbeReview, an AdmissionReview for a pod
// without the lock annotation, on a new connection (so it crosses the
// Service's routing, not a kept-alive connection to one replica), and
// succeeds when the webhook allows it under the UID it sent. It needs no
// RBAC: plain HTTPS to the Service.
package webhookwait

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/internal/cli"
	"github.com/redislock/redislock/internal/inject"
)

// Name is the subcommand's name.
const Name = "webhook-wait"

// Options are the subcommand's flags.
type Options struct {
	// URL is the webhook's, as the API server calls it:
	// https://<service>.<namespace>.svc:443/mutate-v1-pod.
	URL string
	// Connect, if set, is the host (an IP or name, no port) to connect to
	// instead of URL's: the Service's ClusterIP where pods have no DNS.
	// TLS still checks the certificate for URL's host.
	Connect string
	// CAFile holds the PEM CA certificates that the webhook's serving
	// certificate must chain to; empty: the certificate is not verified
	// (the wait is about the route, not the trust).
	CAFile string
	// Timeout bounds the whole wait; Interval is the time from one
	// attempt's start to the next's, and AttemptTimeout bounds each.
	Timeout, Interval, AttemptTimeout time.Duration
	// Log gets one line per failed attempt, and the outcome.
	Log io.Writer
}

// Command runs `redislock webhook-wait` with args.
func Command(ctx context.Context, args []string, log io.Writer) error {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	o := Options{Log: log}
	fs.StringVar(&o.URL, "url", "", "the webhook's URL, as its webhook configuration names it: https://<service>.<namespace>.svc:443"+inject.Path+" (required)")
	fs.StringVar(&o.Connect, "connect", "", "connect to this host (the Service's ClusterIP, say $(<SERVICE>_SERVICE_HOST)) instead of the URL's, whose name TLS still checks: for pods without DNS")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA certificates the webhook's certificate must chain to (its Secret's ca.crt); empty: not verified")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.DurationVar(&o.Interval, "interval", time.Second, "time between attempts")
	fs.DurationVar(&o.AttemptTimeout, "attempt-timeout", 5*time.Second, "bound of each attempt (the webhook configuration's default timeoutSeconds)")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: redislock %s -url URL [flags]\n\nPOSTs an AdmissionReview for a pod without the lock annotation to the injection webhook, once per interval, until it is allowed under the UID sent; exits 0 then, 1 at the timeout with the last reason.\n\n", Name)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected arguments %q", Name, fs.Args())
	}
	if _, _, err := o.check(); err != nil {
		return cli.Usage(err)
	}
	return Wait(ctx, o)
}

// check returns the URL to POST to and the address to connect to, or an
// error naming the flag whose value cannot work.
func (o Options) check() (*url.URL, string, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: -url: %w", Name, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return nil, "", fmt.Errorf("%s: -url %q: want https://<service>.<namespace>.svc:443%s", Name, o.URL, inject.Path)
	}
	if strings.Contains(o.Connect, "$(") {
		// Kubernetes leaves $(VAR) as it is when VAR is not set.
		return nil, "", fmt.Errorf("%s: -connect %q: the variable was not set (the kubelet sets <SERVICE>_SERVICE_HOST only for the Services of the pod's namespace that existed before it started)", Name, o.Connect)
	}
	if strings.Contains(o.Connect, ":") && net.ParseIP(o.Connect) == nil {
		return nil, "", fmt.Errorf("%s: -connect %q: want a host or an IP, without a port (the port is the URL's)", Name, o.Connect)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-timeout", o.Timeout}, {"-interval", o.Interval}, {"-attempt-timeout", o.AttemptTimeout}} {
		if d.v <= 0 {
			return nil, "", fmt.Errorf("%s: %s %v: want a positive duration", Name, d.flag, d.v)
		}
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	target := net.JoinHostPort(u.Hostname(), port)
	if o.Connect != "" {
		target = net.JoinHostPort(o.Connect, port)
	}
	return u, target, nil
}

// Wait tries o.URL once per o.Interval until the webhook allows the probe,
// and returns nil then; after o.Timeout, or when ctx ends, an error with
// the last attempt's reason. Each failed attempt's reason goes to o.Log.
func Wait(ctx context.Context, o Options) error {
	u, target, err := o.check()
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			_, _ = fmt.Fprintf(o.Log, Name+": "+format+"\n", args...)
		}
	}
	start := time.Now()
	attempts := 0
	var last error
	err = wait.PollUntilContextTimeout(ctx, o.Interval, o.Timeout, true, func(ctx context.Context) (bool, error) {
		attempts++
		err := attempt(ctx, o, u, target)
		switch {
		case err == nil:
			return true, nil
		case ctx.Err() != nil && last != nil:
			// Cut off by the timeout: the attempt before says more.
			return false, nil
		}
		last = err
		logf("attempt %d (%.1fs): %v", attempts, time.Since(start).Seconds(), err)
		return false, nil
	})
	via := ""
	if o.Connect != "" {
		via = " via " + target
	}
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("%s: the webhook at %s%s did not allow the probe within %v (%d attempts); last: %w", Name, o.URL, via, o.Timeout, attempts, last)
	}
	logf("the webhook at %s%s allowed the probe after %d attempts in %.1fs", o.URL, via, attempts, time.Since(start).Seconds())
	return nil
}

// attempt is one probe, on a connection of its own, to target (an
// address, host:port) under u's name.
func attempt(ctx context.Context, o Options, u *url.URL, target string) error {
	ctx, cancel := context.WithTimeout(ctx, o.AttemptTimeout)
	defer cancel()
	tlsConfig := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	if o.CAFile == "" {
		tlsConfig.InsecureSkipVerify = true //nolint:gosec // asked for (-ca-file empty): the wait checks the route, not the trust
	} else {
		// Read each time: the kubelet updates a mounted Secret in place.
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return fmt.Errorf("-ca-file: %w", err)
		}
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-ca-file %s: no PEM certificate in it", o.CAFile)
		}
	}
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, target)
		},
		DisableKeepAlives: true,
		TLSClientConfig:   tlsConfig,
		Proxy:             nil, // as the API server, straight to the Service
	}
	defer transport.CloseIdleConnections()
	uid, review, err := inject.ProbeReview()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(review))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is in every line already
		}
		return fmt.Errorf("POST to %s: %w", target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	return inject.CheckProbeAnswer(uid, resp.StatusCode, body)
}
