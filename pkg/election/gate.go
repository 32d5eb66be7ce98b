package election

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// CauseNotLeading is the cause type of the API error a gated write gets
// while this candidate does not lead: IsNotLeading finds it.
const CauseNotLeading metav1.CauseType = "RedisLockNotLeading"

// Gate returns a copy of cfg whose requests pass only while l leads: every
// mutating request (POST, PUT, PATCH, DELETE) is refused, before it is
// sent, unless Leading is true at that instant by the held lock's local
// monotonic deadline. Reads (GET, LIST, WATCH) pass. A refused request
// gets a Conflict API error (409) whose message says that leadership is
// not held, and whose cause IsNotLeading finds; the API server never sees
// it.
//
// Give the gated config to the manager (ctrl.NewManager) and keep the
// election on an ungated one, as mgrelection does: its events are not
// gated. The gate bounds when a write leaves this process, not when the
// API server applies it; a write already in flight at the deadline may
// still land, within the network's delay.
func (l *Lock) Gate(cfg *rest.Config) *rest.Config {
	return GateFunc(cfg, l.name, func(*http.Request) bool {
		_, _, ok := l.Leading()
		return ok
	})
}

// GateFunc returns a copy of cfg whose mutating requests (POST, PUT, PATCH,
// DELETE) are sent only if held(req) is true at that instant, as Lock.Gate
// does for a Lock: a refused request gets the Conflict API error whose
// cause IsNotLeading finds, naming the lock name, and never reaches the
// API server. Reads pass without a call to held. A sharded lock's gate
// (mgrsharding) decides by the shard the request's context carries.
func GateFunc(cfg *rest.Config, name string, held func(*http.Request) bool) *rest.Config {
	gated := rest.CopyConfig(cfg)
	gated.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gate{rt: rt, name: name, held: held} })
	return gated
}

// IsNotLeading reports whether err is a write a Gate refused.
func IsNotLeading(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == CauseNotLeading {
			return true
		}
	}
	return false
}

// gate is the RoundTripper of a gated config.
type gate struct {
	rt   http.RoundTripper
	name string
	held func(*http.Request) bool
}

func (g gate) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return g.rt.RoundTrip(req)
	}
	if g.held(req) {
		return g.rt.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper must close it, even on error
	}
	return refusal(req, g.name)
}

// refusal is the API server's answer that the gate gives in its place.
func refusal(req *http.Request, name string) (*http.Response, error) {
	status := apierrors.NewConflict(resource, name,
		fmt.Errorf("%s %s not sent: this candidate does not hold the lock at this instant (write gate)", req.Method, req.URL.Path)).Status()
	status.Details.Causes = []metav1.StatusCause{{Type: CauseNotLeading, Message: "leadership is not held"}}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("election: write gate: %w", err)
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", http.StatusConflict, http.StatusText(http.StatusConflict)),
		StatusCode:    http.StatusConflict,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}
