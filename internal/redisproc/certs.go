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

// tlsFiles are the PEM files of a server's TLS set-up.
type tlsFiles struct {
	ca, clientCert, clientKey []byte
}

// writeTLSFiles writes a fresh CA (ca.pem) and a server certificate for
// 127.0.0.1 signed by it (cert.pem, key.pem) into dir, and returns the CA
// and a client certificate signed by it, with its key.
func writeTLSFiles(dir string) (tlsFiles, error) {
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redisproc test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caPEM, _, caKey, err := newCert(caTmpl, nil, nil)
	if err != nil {
		return tlsFiles{}, err
	}
	srvPEM, srvKeyPEM, _, err := newCert(&x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caTmpl, caKey)
	if err != nil {
		return tlsFiles{}, err
	}
	cliPEM, cliKeyPEM, _, err := newCert(&x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "redisproc test client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caTmpl, caKey)
	if err != nil {
		return tlsFiles{}, err
	}
	for name, data := range map[string][]byte{"ca.pem": caPEM, "cert.pem": srvPEM, "key.pem": srvKeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return tlsFiles{}, fmt.Errorf("redisproc: %w", err)
		}
	}
	return tlsFiles{ca: caPEM, clientCert: cliPEM, clientKey: cliKeyPEM}, nil
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
