package redisproc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
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
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redisproc test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caPEM, _, caKey, err := newCert(caTmpl, nil, nil)
	if err != nil {
		return Certificates{}, err
	}
	srvPEM, srvKeyPEM, _, err := newCert(&x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caTmpl, caKey)
	if err != nil {
		return Certificates{}, err
	}
	cliPEM, cliKeyPEM, _, err := newCert(&x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "redisproc test client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caTmpl, caKey)
	if err != nil {
		return Certificates{}, err
	}
	return Certificates{CA: caPEM, ServerCert: srvPEM, ServerKey: srvKeyPEM, ClientCert: cliPEM, ClientKey: cliKeyPEM}, nil
}

// newCert makes a key and a certificate of it from tmpl, signed by parent
// with parentKey (self-signed when parent is nil), and returns both in PEM.
func newCert(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, key *ecdsa.PrivateKey, err error) {
	if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, nil, nil, fmt.Errorf("redisproc: %w", err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("redisproc: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("redisproc: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), key, nil
}
