package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// handler serves /leader (200 while this pod leads, else 503, with the
// status as JSON; ?wait= long-polls for a change), /healthz and /metrics.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /leader", a.changes.Handler(a.status, a.o.Clock))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}
