package webhookcert

import "errors"

var (
	// ErrInvalidOptions is wrapped by every error New returns for Options
	// it cannot work with; the message names the broken rule.
	ErrInvalidOptions = errors.New("webhookcert: invalid options")

	// ErrWebhookConfigNotFound is wrapped by Ensure's error when the
	// MutatingWebhookConfiguration does not exist; Ensure never creates it.
	ErrWebhookConfigNotFound = errors.New("webhookcert: mutating webhook configuration not found")
)
