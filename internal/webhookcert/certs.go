package webhookcert

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redislock/redislock/internal/pki"
)

// backdate is how far before its issue time a certificate becomes valid, so
// that a verifier whose clock runs behind ours accepts it at once.
const backdate = time.Hour

// parseCert parses the first certificate in a PEM block.
func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// newCA issues a self-signed CA valid from now for validity.
func newCA(now time.Time, validity time.Duration) (*pki.KeyPair, error) {
	return pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("webhookcert-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

// newServingCert issues a server certificate for hosts, signed by ca and
// valid from now for validity.
func newServingCert(ca *pki.KeyPair, hosts []string, now time.Time, validity time.Duration) (*pki.KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return pki.Issue(tmpl, ca)
}

// expiresWithin reports whether c is expired or expires within d of now.
func expiresWithin(c *x509.Certificate, now time.Time, d time.Duration) bool {
	return !now.Before(c.NotAfter.Add(-d))
}

// covers reports whether c is valid for every one of hosts.
func covers(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}
