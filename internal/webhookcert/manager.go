package webhookcert

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// retryAfterError is the longest Start waits after a failed pass.
const retryAfterError = time.Minute

// Manager keeps the webhook's serving certificate, its Secret and the
// webhook configuration's caBundle consistent; see the package comment. Its
// methods are safe to call from several goroutines, and several Managers,
// in one process or many, may share the Secret.
type Manager struct {
	c client.Client
	o Options
}

// New returns a Manager that reads and writes through c, which must be
// uncached and know core/v1 and admissionregistration/v1 (client.New's
// default scheme does). Its error wraps ErrInvalidOptions and names the
// first rule o breaks.
func New(c client.Client, o Options) (*Manager, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: client is nil", ErrInvalidOptions)
	}
	o, err := o.complete()
	if err != nil {
		return nil, err
	}
	return &Manager{c: c, o: o}, nil
}

// The Secret lives in the controller's namespace (see controllercmd); both
// it and the webhook configuration are granted by name (create cannot be:
// the API server does not know the name before the object exists), and the
// Helm chart renders its own names.
// +kubebuilder:rbac:groups="",namespace=redislock-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=redislock-system,resources=secrets,resourceNames=redislock-webhook-cert,verbs=get;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=redislock-mutating-webhook-configuration,verbs=get;update

// Ensure makes one pass: after it returns nil, the Secret holds a CA and a
// serving certificate that need no renewal, covering every host and signed
// by that CA; every webhook of the configuration trusts that CA; and
// CertDir holds that certificate and key. It writes only what differs.
// Its error wraps ErrWebhookConfigNotFound when the configuration does not
// exist; the files are written nonetheless.
func (m *Manager) Ensure(ctx context.Context) error {
	data, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	// The bundle goes first, so the API server trusts a new CA before this
	// replica serves a certificate signed by it.
	return errors.Join(m.ensureBundle(ctx, caBundle(data)), m.writeFiles(data))
}

// Start runs Ensure at once and then every CheckInterval, or within a
// minute after a failed pass, until ctx ends; then it returns nil. It logs
// failures and never returns because of one. It makes Manager a
// controller-runtime manager.Runnable.
func (m *Manager) Start(ctx context.Context) error {
	timer := m.o.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		next := m.o.CheckInterval
		if err := m.Ensure(ctx); err != nil && ctx.Err() == nil {
			next = min(next, retryAfterError)
			m.o.Logger.Error(err, "ensure webhook certificate", "retryIn", next)
		}
		timer.Reset(next)
	}
}

// NeedLeaderElection returns false: every replica keeps its own CertDir
// current, leader or not.
func (m *Manager) NeedLeaderElection() bool { return false }
