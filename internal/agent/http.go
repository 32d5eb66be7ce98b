package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
)

// timeouts bound how long a connection may hold one of the agent's HTTP
// servers without making progress (see http.Server for each).
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultTimeouts are the servers' timeouts. read and write bound a whole
// request and its answer: a kubelet probe or a scrape takes milliseconds.
// A long poll of /leader moves its own write deadline to the end of its
// wait (see leaderhttp.Changes.Handler), and net/http lifts the read
// deadline while a handler runs, so neither need exceed
// leaderhttp.MaxWait. idle outlasts a client's pause between polls, and
// Prometheus's between scrapes at the usual 15s.
var defaultTimeouts = timeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 10 * time.Second, idle: 30 * time.Second}

// maxHeaderBytes bounds a request's line and headers (net/http allows 4
// KiB more): a GET of /leader with its query, a probe or a scrape needs
// well under 1 KiB, and a client must not make the agent buffer the
// default 1 MiB per connection.
const maxHeaderBytes = 8 << 10

// handler serves /leader (200 while this pod leads, else 503, with the
// status as JSON; ?wait= long-polls for a change), /healthz and /metrics.
func (a *Agent) handler() http.Handler {
	mux := a.probeHandler()
	mux.Handle("GET /leader", a.leader)
	return mux
}

// probeHandler serves /healthz (the process serves) and /metrics.
func (a *Agent) probeHandler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

// httpServer is one of the agent's HTTP servers, with the listener it
// serves on.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
}

// httpServers are the agent's HTTP servers: handler on Options.Addr, and
// probeHandler on Options.ProbeAddr if set.
type httpServers struct {
	all []httpServer
	// endRequests ends the requests' contexts, so that a long poll does
	// not hold the shutdown up.
	endRequests context.CancelFunc
}

// listen listens on Options.Addr (and ProbeAddr) and returns the servers
// of the agent's endpoints there, not yet serving. Each holds at most
// Options.MaxConnections connections at once.
func (a *Agent) listen(ctx context.Context) (*httpServers, error) {
	requests, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	s := &httpServers{endRequests: endRequests}
	routes := []struct {
		addr string
		h    http.Handler
	}{{a.o.Addr, a.handler()}, {a.o.ProbeAddr, a.probeHandler()}}
	for _, r := range routes {
		if r.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			for _, open := range s.all {
				_ = open.ln.Close()
			}
			endRequests()
			return nil, fmt.Errorf("agent: listen: %w", err)
		}
		srv := &http.Server{
			Handler:           r.h,
			ReadHeaderTimeout: a.timeouts.readHeader,
			ReadTimeout:       a.timeouts.read,
			WriteTimeout:      a.timeouts.write,
			IdleTimeout:       a.timeouts.idle,
			MaxHeaderBytes:    maxHeaderBytes,
			BaseContext:       func(net.Listener) context.Context { return requests },
		}
		s.all = append(s.all, httpServer{srv: srv, ln: netutil.LimitListener(ln, a.o.MaxConnections)})
	}
	return s, nil
}

// serve serves until stop, then returns nil; if the server fails first, it
// returns its error. Either way it closes the listener.
func (s httpServer) serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("agent: serve HTTP: %w", err)
	}
	return nil
}

// stop shuts the servers down within finalWriteTimeout, after ending the
// requests' contexts; serve returns once it is called, even before it
// starts serving. A shutdown that fails is logged to log.
func (s *httpServers) stop(ctx context.Context, log logr.Logger) {
	s.endRequests()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
	defer cancel()
	for _, srv := range s.all {
		if err := srv.srv.Shutdown(shutdown); err != nil {
			log.Error(err, "HTTP server shutdown", "address", srv.ln.Addr().String())
		}
	}
}
