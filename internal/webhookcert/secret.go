package webhookcert

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/pki"
)

// Keys of the Secret besides corev1.TLSCertKey and corev1.TLSPrivateKeyKey.
const (
	caCertKey     = "ca.crt"
	caKeyKey      = "ca.key"
	previousCAKey = "ca-previous.crt"
)

// racePasses bounds how often a read-modify-write is retried after losing
// a race: the retry re-reads what the winner stored and then has nothing
// left to write, so a second pass is almost always the last.
var racePasses = wait.Backoff{Steps: 3, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 0.1}

// retryRaces runs pass until it no longer fails because another writer
// got there first (a Create that finds the object, an Update of a stale
// read), at most racePasses.Steps times, and returns its last error.
func retryRaces(pass func() error) error {
	return retry.OnError(racePasses, lostRace, pass)
}

func lostRace(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// ensureSecret makes the Secret hold a CA and serving certificate that need
// nothing done, and returns its data.
func (m *Manager) ensureSecret(ctx context.Context) (map[string][]byte, error) {
	var data map[string][]byte
	err := retryRaces(func() error {
		var err error
		data, err = m.syncSecret(ctx)
		return err
	})
	return data, err
}

// syncSecret is one read-modify-write pass of ensureSecret.
func (m *Manager) syncSecret(ctx context.Context) (map[string][]byte, error) {
	key := client.ObjectKey{Namespace: m.o.Namespace, Name: m.o.SecretName}
	var s corev1.Secret
	err := m.c.Get(ctx, key, &s)
	found := err == nil
	if !found && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get secret %s: %w", key, err)
	}
	want, err := m.desired(s.Data, m.o.Clock.Now())
	if err != nil {
		return nil, err
	}
	switch {
	case !found:
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type:       corev1.SecretTypeTLS,
			Data:       want,
		}
		if err := m.c.Create(ctx, &s); err != nil {
			return nil, fmt.Errorf("create secret %s: %w", key, err)
		}
	case !maps.EqualFunc(s.Data, want, bytes.Equal):
		s.Data = want
		if err := m.c.Update(ctx, &s); err != nil {
			return nil, fmt.Errorf("update secret %s: %w", key, err)
		}
	default:
		return want, nil
	}
	m.o.Logger.Info("stored webhook certificate", "secret", key, "resourceVersion", s.ResourceVersion)
	return want, nil
}

// desired returns the Secret data that Ensure wants, given the stored data:
// what is usable is kept, the rest is issued anew as of now.
func (m *Manager) desired(stored map[string][]byte, now time.Time) (map[string][]byte, error) {
	ca, err := pki.ParseKeyPair(stored[caCertKey], stored[caKeyKey])
	previous := stored[previousCAKey]
	if err != nil || !ca.Cert.IsCA || expiresWithin(ca.Cert, now, m.o.CAValidity/3) {
		if err == nil {
			previous = ca.CertPEM
		}
		if ca, err = newCA(now, m.o.CAValidity); err != nil {
			return nil, fmt.Errorf("issue CA: %w", err)
		}
	}
	if prev, err := parseCert(previous); err != nil || !now.Before(prev.NotAfter) {
		previous = nil
	}
	leaf, err := pki.ParseKeyPair(stored[corev1.TLSCertKey], stored[corev1.TLSPrivateKeyKey])
	if err != nil || leaf.Cert.CheckSignatureFrom(ca.Cert) != nil || !covers(leaf.Cert, m.o.Hosts) ||
		expiresWithin(leaf.Cert, now, m.o.CertValidity/3) {
		if leaf, err = newServingCert(ca, m.o.Hosts, now, m.o.CertValidity); err != nil {
			return nil, fmt.Errorf("issue serving certificate: %w", err)
		}
	}
	want := maps.Clone(stored)
	if want == nil {
		want = map[string][]byte{}
	}
	want[caCertKey], want[caKeyKey] = ca.CertPEM, ca.KeyPEM
	want[corev1.TLSCertKey], want[corev1.TLSPrivateKeyKey] = leaf.CertPEM, leaf.KeyPEM
	if previous == nil {
		delete(want, previousCAKey)
	} else {
		want[previousCAKey] = previous
	}
	return want, nil
}

// caBundle is the PEM bundle that webhooks must trust given the Secret's
// data: the current CA, then the previous one while it has not expired.
func caBundle(data map[string][]byte) []byte {
	return slices.Concat(data[caCertKey], data[previousCAKey])
}
