// Package healthprobe reads and runs the health signal that gates an
// agent's leadership (`redislock agent -health`, the pod annotation
// redislock.io/health): an HTTP GET, healthy on a status from 200 to 399
// as the kubelet's httpGet probe, a file, healthy while it exists, or
// Ready, the pod's own app containers' readiness as the kubelet reports
// it, which the agent learns by watching its pod (Check does not run it).
package healthprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// ErrInvalid is wrapped by Parse's errors.
var ErrInvalid = errors.New("healthprobe: invalid health signal")

// ErrUnhealthy is wrapped by Check's errors: the signal says the app is
// unhealthy, or could not be read.
var ErrUnhealthy = errors.New("healthprobe: unhealthy")

// client follows no redirect: a status from 300 to 399 is healthy, as the
// kubelet counts it, wherever it points.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Ready is the signal of the pod's readiness: healthy while every app
// container of the pod is Ready in its status, the agent's own aside.
const Ready = "ready"

// Probe is a parsed health signal.
type Probe struct {
	url  string // for an HTTP GET
	file string // for a file
	pod  bool   // Ready
}

// Parse reads a signal: "http://host:port/path", "file:/path" (or
// "file:///path") or Ready. The error says what a signal looks like.
func Parse(s string) (Probe, error) {
	if s == Ready {
		return Probe{pod: true}, nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return Probe{}, fmt.Errorf("%w %q: %w", ErrInvalid, s, err)
	case u.Scheme == "http" && u.Host != "":
		return Probe{url: s}, nil
	case u.Scheme == "file" && (u.Host == "" || u.Host == "localhost") && strings.HasPrefix(u.Path, "/"):
		return Probe{file: u.Path}, nil
	}
	return Probe{}, fmt.Errorf("%w %q: want http://HOST:PORT/PATH (healthy on a status from 200 to 399), file:/PATH (healthy while the file exists) or ready (healthy while the pod's app containers are Ready)", ErrInvalid, s)
}

// Pod reports whether p is Ready, the pod's readiness, which the agent
// learns by watching its pod rather than by Check.
func (p Probe) Pod() bool { return p.pod }

// Check probes once, within ctx: nil when the app is healthy, else an
// error wrapping ErrUnhealthy that says why. Ready cannot be checked: an
// error wrapping ErrInvalid.
func (p Probe) Check(ctx context.Context) error {
	if p.pod {
		return fmt.Errorf("%w: %s is the pod's status, which the agent watches; there is nothing to check", ErrInvalid, Ready)
	}
	if p.file != "" {
		if _, err := os.Stat(p.file); err != nil {
			return fmt.Errorf("%w: %w", ErrUnhealthy, err)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	// A bounded read lets the connection be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return fmt.Errorf("%w: GET %s: %s", ErrUnhealthy, p.url, resp.Status)
	}
	return nil
}

// String gives back the signal.
func (p Probe) String() string {
	if p.pod {
		return Ready
	}
	if p.file != "" {
		return "file:" + p.file
	}
	return p.url
}
