// Package pki issues the certificates this project makes for itself: the
// webhook's self-signed CA and serving certificate (internal/webhookcert),
// the test servers' (internal/testing/redisproc) and the real cluster's
// (hack/cluster). One issuer, so that all of them use the same key type
// (ECDSA P-256), serial numbers and PEM encoding.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
)

// KeyPair is a certificate and its private key, as PEM and parsed.
type KeyPair struct {
	// CertPEM is the certificate, a PEM "CERTIFICATE" block.
	CertPEM []byte
	// KeyPEM is the private key, a PEM "PRIVATE KEY" block (PKCS #8).
	KeyPEM []byte
	Cert   *x509.Certificate
	Key    crypto.Signer
}

// Issue generates an ECDSA P-256 key and a certificate of it from tmpl,
// signed by parent, or by itself when parent is nil. It sets tmpl's serial
// number to a random 128-bit one; the rest (subject, validity, usages,
// names) is the caller's.
func Issue(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	signer, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return ParseKeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// ParseKeyPair parses a PEM certificate and the PEM private key that must
// match it, and that must be able to sign.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: a private key of type %T cannot sign", pair.PrivateKey)
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, Cert: pair.Leaf, Key: key}, nil
}
