package webhookcert

import (
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Defaults for the Options durations left zero.
const (
	defaultCAValidity    = 10 * 365 * 24 * time.Hour
	defaultCertValidity  = 365 * 24 * time.Hour
	defaultCheckInterval = time.Hour
)

// Options configures a Manager. New rejects Options that break a rule
// stated here, and fills in the defaults of the fields left zero.
type Options struct {
	// Namespace and SecretName name the Secret (type kubernetes.io/tls) that
	// stores the CA and the serving certificate. Required. Ensure creates it
	// when it does not exist.
	Namespace, SecretName string

	// WebhookConfigName names the MutatingWebhookConfiguration whose every
	// webhooks[].clientConfig.caBundle gets the CA bundle. Required. Ensure
	// never creates it.
	WebhookConfigName string

	// Hosts are the serving certificate's subject alternative names: an
	// entry that parses as an IP address is an IP SAN, any other a DNS SAN.
	// At least one, none empty.
	Hosts []string

	// CertDir is the directory where Ensure writes tls.crt and tls.key for
	// controller-runtime's webhook server. Required; created if missing.
	CertDir string

	// CAValidity is the lifetime of a new CA: 10 years (3650 days) if zero.
	// The CA is replaced when less than a third of it remains.
	CAValidity time.Duration

	// CertValidity is the lifetime of a new serving certificate: 1 year
	// (365 days) if zero, at most CAValidity. The certificate is reissued
	// when less than a third of it remains.
	CertValidity time.Duration

	// CheckInterval is how often Start runs Ensure: 1 hour if zero. After a
	// failed pass Start retries within a minute.
	CheckInterval time.Duration

	// Clock tells the time that certificates are issued and checked
	// against, and times Start's passes: the real clock if nil.
	Clock clock.Clock

	// Logger receives a line for every write and every failed pass of
	// Start; the zero Logger discards them.
	Logger logr.Logger
}

// complete returns o with its defaults filled in, or the first rule it breaks.
func (o Options) complete() (Options, error) {
	o.Hosts = slices.Clone(o.Hosts)
	if o.CAValidity == 0 {
		o.CAValidity = defaultCAValidity
	}
	if o.CertValidity == 0 {
		o.CertValidity = defaultCertValidity
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = defaultCheckInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var broken string
	switch {
	case o.Namespace == "":
		broken = "Namespace is required"
	case o.SecretName == "":
		broken = "SecretName is required"
	case o.WebhookConfigName == "":
		broken = "WebhookConfigName is required"
	case len(o.Hosts) == 0:
		broken = "Hosts needs at least one entry"
	case slices.Contains(o.Hosts, ""):
		broken = "Hosts has an empty entry"
	case o.CertDir == "":
		broken = "CertDir is required"
	case o.CAValidity < 0, o.CertValidity < 0, o.CheckInterval < 0:
		broken = fmt.Sprintf("durations must not be negative (CAValidity %v, CertValidity %v, CheckInterval %v)",
			o.CAValidity, o.CertValidity, o.CheckInterval)
	case o.CertValidity > o.CAValidity:
		broken = fmt.Sprintf("CertValidity (%v) must not exceed CAValidity (%v)", o.CertValidity, o.CAValidity)
	default:
		return o, nil
	}
	return o, fmt.Errorf("%w: %s", ErrInvalidOptions, broken)
}
