package webhookcert

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureBundle sets bundle as the caBundle of every webhook of the
// MutatingWebhookConfiguration, writing only when one differs.
func (m *Manager) ensureBundle(ctx context.Context, bundle []byte) error {
	name := m.o.WebhookConfigName
	return retryRaces(func() error {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := m.c.Get(ctx, client.ObjectKey{Name: name}, &cfg); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%w: %s", ErrWebhookConfigNotFound, name)
			}
			return fmt.Errorf("get mutating webhook configuration %s: %w", name, err)
		}
		changed := false
		for i := range cfg.Webhooks {
			if cc := &cfg.Webhooks[i].ClientConfig; !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, changed = bundle, true
			}
		}
		if !changed {
			return nil
		}
		if err := m.c.Update(ctx, &cfg); err != nil {
			return fmt.Errorf("update mutating webhook configuration %s: %w", name, err)
		}
		m.o.Logger.Info("set webhook caBundle", "mutatingWebhookConfiguration", name, "webhooks", len(cfg.Webhooks))
		return nil
	})
}
