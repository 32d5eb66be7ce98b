package webhookcert

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// writeFiles writes the serving certificate and key of the Secret's data
// into CertDir, each file only when its content differs. The key goes
// first: a certwatcher that reloads after each file sees a matching pair
// again only once the certificate follows, and keeps the old pair until then.
func (m *Manager) writeFiles(data map[string][]byte) error {
	if err := os.MkdirAll(m.o.CertDir, 0o700); err != nil {
		return fmt.Errorf("create cert dir: %w", err)
	}
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{corev1.TLSPrivateKeyKey, 0o600}, {corev1.TLSCertKey, 0o644}} {
		path := filepath.Join(m.o.CertDir, f.name)
		written, err := writeFileAtomic(path, data[f.name], f.mode)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if written {
			m.o.Logger.Info("wrote webhook certificate file", "path", path)
		}
	}
	return nil
}

// writeFileAtomic replaces the file at path with data by renaming a
// temporary file over it, so a reader sees the old content or the new one,
// never a mix. It does nothing, and reports false, when path already holds
// data.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return false, err
	}
	// Cleans up after a failure; after the rename there is nothing to remove.
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err = errors.Join(err, tmp.Chmod(mode), tmp.Sync(), tmp.Close()); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}
