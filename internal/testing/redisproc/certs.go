package redisproc

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/redislock/redislock/internal/pki"
)

// Certificates are a fresh CA and, signed by it, a server certificate for
// 127.0.0.1 and a client certificate, with their keys; all PEM, valid for
// a day.
type Certificates struct {
	CA                    []byte
	ServerCert, ServerKey []byte
	ClientCert, ClientKey []byte
}

// writeTLSFiles writes new Certificates' CA (ca.pem) and server
// certificate (cert.pem, key.pem) into dir, and returns them.
func writeTLSFiles(dir string) (Certificates, error) {
	c, err := NewCertificates()
	if err != nil {
		return Certificates{}, err
	}
	for name, data := range map[string][]byte{"ca.pem": c.CA, "cert.pem": c.ServerCert, "key.pem": c.ServerKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return Certificates{}, fmt.Errorf("redisproc: %w", err)
		}
	}
	return c, nil
}

// NewCertificates makes new Certificates, for a TLS server and its
// clients, and for tests that need a key pair.
func NewCertificates() (Certificates, error) {
	now := time.Now()
	valid := func(c *x509.Certificate) *x509.Certificate {
		c.NotBefore, c.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		return c
	}
	ca, err := pki.Issue(valid(&x509.Certificate{
		Subject: pkix.Name{CommonName: "redisproc test CA"}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}), nil)
	if err != nil {
		return Certificates{}, fmt.Errorf("redisproc: %w", err)
	}
	srv, err := pki.Issue(valid(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}), ca)
	if err != nil {
		return Certificates{}, fmt.Errorf("redisproc: %w", err)
	}
	cli, err := pki.Issue(valid(&x509.Certificate{
		Subject:  pkix.Name{CommonName: "redisproc test client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}), ca)
	if err != nil {
		return Certificates{}, fmt.Errorf("redisproc: %w", err)
	}
	return Certificates{CA: ca.CertPEM, ServerCert: srv.CertPEM, ServerKey: srv.KeyPEM, ClientCert: cli.CertPEM, ClientKey: cli.KeyPEM}, nil
}
