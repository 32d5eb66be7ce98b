package inject

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// reachTimeout bounds one check: the kubelet gives a readiness probe 1s by
// default, and through a Service on the node the answer takes milliseconds.
const reachTimeout = time.Second

var reachChecksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "redislock_webhook_reachable_checks_total",
	Help: "Requests the readiness check sent to the injection webhook through its Service, by result (ok or failed): one per readiness probe.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(reachChecksTotal) }

// ServiceCheck is a readiness check: it passes when the webhook answers
// through its Service's ClusterIP, the address the API server calls, so a
// controller is Ready (and its Deployment Available) only once the Service
// routes to a webhook server. Each call sends one AdmissionReview, for a pod
// without the lock annotation, on a new connection (so it crosses the
// Service's routing, not a kept-alive connection to one replica), and
// expects it allowed under the UID it sent.
//
// The Service must publish not-ready addresses: otherwise it routes to no
// replica before one is Ready, and none ever is.
//
// What it does not prove: that the API server trusts the serving
// certificate (the caBundle; webhookcert keeps it), nor that the API
// server's own route to the ClusterIP works when the API server runs off
// this node: it proves the route from the controller's pod.
type ServiceCheck struct {
	// Reader gets the Service: an uncached reader (the manager's
	// APIReader). One GET when the check first runs and after each failed
	// check (a ClusterIP changes only when its Service is made anew).
	Reader client.Reader
	// Service is the webhook's Service, in front of port 443 (or its
	// first port) of this webhook server.
	Service types.NamespacedName
	// Dial connects; net.Dialer's DialContext if nil. Tests map the
	// ClusterIP to where the webhook listens.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	once   sync.Once
	client *http.Client
	mu     sync.Mutex
	addr   string // ClusterIP:port, once read
}

// Check implements healthz.Checker.
func (c *ServiceCheck) Check(req *http.Request) error {
	ctx := context.Background()
	if req != nil {
		ctx = req.Context()
	}
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	err := c.check(ctx)
	result := "ok"
	if err != nil {
		result = "failed"
		c.mu.Lock()
		c.addr = "" // read the Service again next time
		c.mu.Unlock()
	}
	reachChecksTotal.WithLabelValues(result).Inc()
	return err
}

func (c *ServiceCheck) check(ctx context.Context) error {
	addr, err := c.address(ctx)
	if err != nil {
		return err
	}
	uid, review, err := probeReview()
	if err != nil {
		return err
	}
	url := "https://" + addr + Path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(review))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("webhook not reachable through Service %s at %s: %w", c.Service, addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return fmt.Errorf("webhook through Service %s: %w", c.Service, err)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &got); err != nil || got.Response == nil {
		return fmt.Errorf("webhook through Service %s answered %s, not an AdmissionReview: %.200q", c.Service, resp.Status, body)
	}
	if got.Response.UID != uid || !got.Response.Allowed {
		return fmt.Errorf("webhook through Service %s: uid %q allowed %v (%v), want uid %q allowed", c.Service, got.Response.UID, got.Response.Allowed, got.Response.Result, uid)
	}
	return nil
}

// address is the Service's ClusterIP and port, read once and again after a
// failed check.
func (c *ServiceCheck) address(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addr != "" {
		return c.addr, nil
	}
	var svc corev1.Service
	if err := c.Reader.Get(ctx, c.Service, &svc); err != nil {
		return "", fmt.Errorf("webhook Service: %w", err)
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("webhook Service %s has no ClusterIP and port (clusterIP %q, %d ports)", c.Service, ip, len(svc.Spec.Ports))
	}
	port := svc.Spec.Ports[0].Port
	for _, p := range svc.Spec.Ports {
		if p.Port == 443 {
			port = p.Port
		}
	}
	c.addr = net.JoinHostPort(ip, strconv.Itoa(int(port)))
	return c.addr, nil
}

func (c *ServiceCheck) httpClient() *http.Client {
	c.once.Do(func() {
		dial := c.Dial
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		c.client = &http.Client{Transport: &http.Transport{
			DialContext: dial,
			// A new connection each time, so each check crosses the
			// Service's routing.
			DisableKeepAlives: true,
			// The check is about the route: whether the API server
			// trusts the certificate is the caBundle's business.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
		}}
	})
	return c.client
}

// probeReview is an AdmissionReview for a pod without the lock annotation,
// which the webhook allows untouched, under a fresh UID.
func probeReview() (types.UID, []byte, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	uid := types.UID("readiness-" + hex.EncodeToString(b))
	pod, err := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "redislock-readiness-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "none"}}},
	})
	if err != nil {
		return "", nil, err
	}
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: pod},
		},
	})
	return uid, review, err
}
