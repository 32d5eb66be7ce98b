package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redislock/redislock/internal/leaderhttp"
)

// handler serves /leader (200 while this pod leads, else 503, with the
// status as JSON), /healthz and /metrics.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /leader", leaderhttp.Handler(a.status))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}
