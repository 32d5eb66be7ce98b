package controller_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/pki"
	"github.com/redislock/redislock/internal/testing/hostile"
)

// secretHost is the name in the TLS server's certificate, which a tenant
// must not learn from the controller.
const secretHost = "db-admin.vault.internal"

// serverText is text that the servers below, the network or the
// controller's dial produce, none of which may reach a status or an event.
var serverText = []string{
	"SSH-2.0", "OpenSSH", "HTTP", "Bad Request", secretHost, "vault", "OK ",
	"refused", "timed out", "timeout", "deadline", "EOF", "reset", "x509", "is valid for", "RESP type", "can't parse", "lookup",
}

// tlsServer serves TLS with a certificate for secretHost only, signed by
// the CA it returns, and then never answers; addr names it localhost.
func tlsServer(t *testing.T) (addr string, caPEM []byte) {
	t.Helper()
	ca, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: secretHost}, DNSNames: []string{secretHost},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, ca)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}}
	s := hostile.Start(t, func(c net.Conn) {
		tc := tls.Server(c, conf)
		if tc.Handshake() == nil {
			hostile.BlackHole(tc)
		}
	})
	// By name, so that verification names what the certificate is for.
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("localhost", port), ca.CertPEM
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A RedisLock may name any address, and the controller dials it from its
// own network position; its author reads the status and the events. What
// a server there sends (a banner, an HTTP status line, a reply that is not
// Redis's, the names in its certificate) and what the dial met (refused or
// timed out) reaches neither: each shows a fixed reason and message, the
// same for a closed port as for a silent one.
func TestServerTextNeverReachesStatusOrEvents(t *testing.T) {
	ns := namespace(t)
	banner := hostile.Start(t, hostile.Banner([]byte("SSH-2.0-OpenSSH_9.6\r\n")))
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	webAddr := web.Listener.Addr().String()
	// Valid RESP, but not what Redis answers to HELLO.
	resp := hostile.Start(t, hostile.Reply([]byte("+OK "+secretHost+"\r\n")))
	tlsAddr, caPEM := tlsServer(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string][]byte{"ca.crt": caPEM}})
	closed := closedPort(t)
	hole := hostile.Start(t, hostile.BlackHole)

	withTLS := redisLock(ns, "tls", v1alpha1.ModeStandalone, tlsAddr)
	withTLS.Spec.Redis.TLS = &v1alpha1.RedisTLS{CASecretRef: &v1alpha1.SecretKeyRef{Name: "ca", Key: "ca.crt"}}
	cases := []struct {
		rl     *v1alpha1.RedisLock
		reason string
	}{
		{redisLock(ns, "banner", v1alpha1.ModeStandalone, banner.Addr), controller.ReasonNotRedis},
		{redisLock(ns, "http", v1alpha1.ModeStandalone, webAddr), controller.ReasonNotRedis},
		{redisLock(ns, "resp", v1alpha1.ModeStandalone, resp.Addr), controller.ReasonNotRedis},
		{withTLS, controller.ReasonTLSVerificationFailed},
		{redisLock(ns, "closed", v1alpha1.ModeStandalone, closed), controller.ReasonUnreachable},
		{redisLock(ns, "hole", v1alpha1.ModeStandalone, hole.Addr), controller.ReasonUnreachable},
		// Nodes that fail for different reasons: NoQuorum, and each
		// node's own in status.nodes.
		{redisLock(ns, "redlock", v1alpha1.ModeRedlock, banner.Addr, webAddr, closed), controller.ReasonNoQuorum},
	}
	for _, c := range cases {
		create(t, c.rl)
	}
	got := map[string]*v1alpha1.RedisLock{}
	for _, c := range cases {
		got[c.rl.Name] = waitLock(t, c.rl, 10*time.Second, "RedisReachable False, "+c.reason,
			isCond(v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, c.reason))
		waitEvent(t, ns, c.rl.Name, controller.EventRedisUnreachable)
	}
	// Read again, after the events: a later look may have written more.
	var events eventsv1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		rl := got[c.rl.Name]
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c.rl), rl); err != nil {
			t.Fatal(err)
		}
		status, err := json.Marshal(rl.Status)
		if err != nil {
			t.Fatal(err)
		}
		texts := map[string]string{"status": string(status)}
		for _, e := range events.Items {
			if e.Regarding.Name == rl.Name {
				texts["event "+e.Reason] = e.Note
			}
		}
		for where, text := range texts {
			for _, s := range serverText {
				if strings.Contains(text, s) {
					t.Errorf("%s: %s carries %q: %s", rl.Name, where, s, text)
				}
			}
		}
		if c := condition(rl, v1alpha1.ConditionReady); c.Reason != controller.ReasonNoQuorum {
			t.Errorf("%s: Ready %s %s; want NoQuorum", rl.Name, c.Status, c.Reason)
		}
	}
	// The port-scan oracle: a closed port and one that accepts and never
	// answers look the same, but for the address the user wrote.
	strip := func(name, addr string) string {
		c := condition(got[name], v1alpha1.ConditionRedisReachable)
		return c.Reason + " " + strings.ReplaceAll(c.Message, addr, "ADDR")
	}
	if closedSays, holeSays := strip("closed", closed), strip("hole", hole.Addr); closedSays != holeSays {
		t.Errorf("a closed port says %q, a silent one %q; want the same", closedSays, holeSays)
	}
	nodes := got["redlock"].Status.Nodes
	want := []string{controller.ReasonNotRedis, controller.ReasonNotRedis, controller.ReasonUnreachable}
	if len(nodes) != len(want) {
		t.Fatalf("status.nodes %+v; want %d nodes", nodes, len(want))
	}
	for i, n := range nodes {
		if n.Reachable || n.Message != controller.FaultMessage(want[i]) {
			t.Errorf("node %d: %+v; want unreachable, with the message of %s", i, n, want[i])
		}
	}
}
