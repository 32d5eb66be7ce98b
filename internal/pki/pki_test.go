package pki_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/pki"
)

// A certificate Issue signs with a CA it issued verifies against that CA
// and no other, for its name, and parses back from its PEM.
func TestIssueSignsWithTheParent(t *testing.T) {
	now := time.Now()
	ca := func() *pki.KeyPair {
		k, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := ca(), ca()
	if a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 {
		t.Fatalf("two certificates share serial %v", a.Cert.SerialNumber)
	}
	leaf, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "svc"}, DNSNames: []string{"svc.ns.svc"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		root *pki.KeyPair
		ok   bool
	}{{a, true}, {b, false}} {
		pool := x509.NewCertPool()
		pool.AddCert(c.root.Cert)
		_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "svc.ns.svc"})
		if (err == nil) != c.ok {
			t.Errorf("verify against CA %s: %v; want ok=%v", c.root.Cert.Subject.CommonName, err, c.ok)
		}
	}
	back, err := pki.ParseKeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil || !back.Cert.Equal(leaf.Cert) {
		t.Fatalf("ParseKeyPair: %v", err)
	}
	if _, err := pki.ParseKeyPair(leaf.CertPEM, a.KeyPEM); err == nil {
		t.Error("ParseKeyPair took a key that does not match the certificate")
	}
}
