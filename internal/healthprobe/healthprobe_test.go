package healthprobe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redislock/redislock/internal/healthprobe"
)

func TestParseTakesHTTPAndFileSignalsOnly(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/ready", "http://localhost:9000/", "file:/run/app/ready", "file:///run/app/ready", "ready"} {
		p, err := healthprobe.Parse(ok)
		if err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
			continue
		}
		if want := strings.Replace(ok, "file:///", "file:/", 1); p.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", ok, p, want)
		}
	}
	for _, bad := range []string{"", "Ready", "tcp://127.0.0.1:80", "https://app/ready", "http:///ready", "file:ready", "file://host/ready", "http://[::1"} {
		if _, err := healthprobe.Parse(bad); !errors.Is(err, healthprobe.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestCheckFollowsTheStatusAndNotRedirects(t *testing.T) {
	var status atomic.Int32
	var followed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Store(true)
		}
		if s := int(status.Load()); s == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", s)
		} else {
			w.WriteHeader(s)
		}
	}))
	defer srv.Close()
	p, err := healthprobe.Parse(srv.URL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		status  int
		healthy bool
	}{{200, true}, {204, true}, {302, true}, {404, false}, {503, false}} {
		status.Store(int32(tc.status))
		err := p.Check(ctx)
		if (err == nil) != tc.healthy || (err != nil && (!errors.Is(err, healthprobe.ErrUnhealthy) || !strings.Contains(err.Error(), http.StatusText(tc.status)))) {
			t.Errorf("status %d: Check = %v, want healthy %v (else ErrUnhealthy naming the status)", tc.status, err, tc.healthy)
		}
	}
	if followed.Load() {
		t.Error("Check followed a redirect")
	}
	srv.Close()
	if err := p.Check(ctx); !errors.Is(err, healthprobe.ErrUnhealthy) {
		t.Errorf("Check of a closed server = %v, want ErrUnhealthy", err)
	}
}

func TestCheckOfAFileIsItsExistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready")
	p, err := healthprobe.Parse("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background()); !errors.Is(err, healthprobe.ErrUnhealthy) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check without the file = %v, want ErrUnhealthy for a missing file", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background()); err != nil {
		t.Errorf("Check with the file = %v, want healthy", err)
	}
}
