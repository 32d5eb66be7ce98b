package inject_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/inject"
)

// countingReader counts the Gets of the Reader it wraps.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// route stands in for kube-proxy (envtest has none): it sends what is
// dialled to the Service's ClusterIP to to, counting connections.
type route struct {
	to    atomic.Value // string
	dials atomic.Int32
}

func (r *route) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	r.dials.Add(1)
	return (&net.Dialer{}).DialContext(ctx, network, r.to.Load().(string))
}

func webhookService(t *testing.T, ns string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redislock-webhook-service"},
		Spec:       corev1.ServiceSpec{PublishNotReadyAddresses: true, Ports: []corev1.ServicePort{{Name: "webhook", Port: 443}}},
	}
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

func newCheck(ns string) (*inject.ServiceCheck, *countingReader, *route) {
	r := &countingReader{Reader: k8s}
	rt := &route{}
	rt.to.Store(webhookAddr)
	return &inject.ServiceCheck{Reader: r, Service: types.NamespacedName{Namespace: ns, Name: "redislock-webhook-service"}, Dial: rt.dial}, r, rt
}

func TestServiceCheckPassesWhenTheWebhookAnswersThroughTheService(t *testing.T) {
	ns := namespace(t)
	webhookService(t, ns)
	check, reader, rt := newCheck(ns)
	for i := range 3 {
		if err := check.Check(nil); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	// One connection (so one request) per check, and the Service read once.
	if got := rt.dials.Load(); got != 3 {
		t.Errorf("3 checks made %d connections, want 3", got)
	}
	if got := reader.gets.Load(); got != 1 {
		t.Errorf("3 passing checks read the Service %d times, want 1", got)
	}
}

func TestServiceCheckFailsWithoutTheService(t *testing.T) {
	ns := namespace(t)
	check, reader, rt := newCheck(ns)
	if err := check.Check(nil); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("no Service: %v, want not found", err)
	}
	if rt.dials.Load() != 0 {
		t.Errorf("dialled without a Service")
	}
	webhookService(t, ns)
	if err := check.Check(nil); err != nil {
		t.Fatalf("once the Service exists: %v", err)
	}
	if got := reader.gets.Load(); got != 2 {
		t.Errorf("Service read %d times, want 2 (again after the failure)", got)
	}
}

func TestServiceCheckFailsWhileTheServiceRoutesNowhere(t *testing.T) {
	ns := namespace(t)
	webhookService(t, ns)
	check, reader, rt := newCheck(ns)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	rt.to.Store(closed) // what the API server sees before kube-proxy routes
	if err := check.Check(nil); err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("nothing behind the Service: %v, want not reachable", err)
	}
	rt.to.Store(webhookAddr)
	if err := check.Check(nil); err != nil {
		t.Fatalf("routed: %v", err)
	}
	if got := reader.gets.Load(); got != 2 {
		t.Errorf("Service read %d times, want 2 (again after the failure)", got)
	}
}

func TestServiceCheckFailsWhenSomethingElseAnswers(t *testing.T) {
	ns := namespace(t)
	webhookService(t, ns)
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(other.Close)
	check, _, rt := newCheck(ns)
	rt.to.Store(other.Listener.Addr().String())
	if err := check.Check(nil); err == nil || !strings.Contains(err.Error(), "not an AdmissionReview") {
		t.Fatalf("a server that is not the webhook: %v", err)
	}
}
