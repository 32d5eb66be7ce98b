package leaderhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The wire format is the one README.md shows, field for field and in order.
func TestHandlerAnswersTheDocumentedJSONAndCode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	until := at.Add(time.Second)
	for _, tc := range []struct {
		name     string
		st       Status
		code     int
		wantBody string
	}{
		{"leader", Status{Leading: true, Identity: "w-1", Holder: "w-1", Lock: "shop/worker", FencingToken: 12, ValidUntil: &until, ObservedAt: at}, http.StatusOK,
			`{"leading":true,"identity":"w-1","holder":"w-1","lock":"shop/worker","fencingToken":12,"validUntil":"2026-01-02T03:04:06.000000006Z","observedAt":"2026-01-02T03:04:05.000000006Z"}` + "\n"},
		{"standby that cannot campaign", Status{Identity: "w-2", Lock: "shop/worker", ObservedAt: at, Error: "redislock: no quorum"}, http.StatusServiceUnavailable,
			`{"leading":false,"identity":"w-2","lock":"shop/worker","observedAt":"2026-01-02T03:04:05.000000006Z","error":"redislock: no quorum"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler(func() Status { return tc.st }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/leader", nil))
			if rec.Code != tc.code {
				t.Errorf("code %d, want %d", rec.Code, tc.code)
			}
			if got := rec.Body.String(); got != tc.wantBody {
				t.Errorf("body\n%s\nwant\n%s", got, tc.wantBody)
			}
			if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v, want JSON, not cached", rec.Header())
			}
		})
	}
}

func TestGetReturnsWhatTheHandlerServes(t *testing.T) {
	until := time.Now().Add(time.Second).UTC()
	want := Status{Leading: true, Identity: "a", Holder: "a", Lock: "ns/l", FencingToken: 7, ValidUntil: &until, ObservedAt: time.Now().UTC()}
	srv := httptest.NewServer(Handler(func() Status { return want }))
	defer srv.Close()
	got, code, err := Get(context.Background(), srv.URL)
	if err != nil || code != http.StatusOK {
		t.Fatalf("Get: %d, %v", code, err)
	}
	if got.Leading != want.Leading || got.Identity != want.Identity || got.FencingToken != want.FencingToken ||
		got.ValidUntil == nil || !got.ValidUntil.Equal(until) || !got.ObservedAt.Equal(want.ObservedAt) {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
}

func TestGetFailsWithoutAnAnswer(t *testing.T) {
	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer notJSON.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, url := range map[string]string{"not a status": notJSON.URL, "too slow": slow.URL, "refused": closed.URL} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if _, code, err := Get(ctx, url); err == nil || code != 0 {
			t.Errorf("%s: Get = %d, %v; want code 0 and an error", name, code, err)
		}
		cancel()
	}
}
