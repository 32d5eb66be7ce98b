package webhookcert_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestStartEnsuresOnATimerThroughErrorsUntilCancelled(t *testing.T) {
	o := newFixture(t, clock.RealClock{}) // Start's timer runs on it
	o.WebhookConfigName += "-created-later"
	o.CheckInterval = 50 * time.Millisecond
	m := newManager(t, o)
	if m.NeedLeaderElection() {
		t.Error("NeedLeaderElection = true; every replica must keep its files current")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()

	// The first pass fails on the missing configuration but stores the
	// Secret; a later one sets the caBundle once the configuration exists.
	eventually(t, 10*time.Second, func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, &corev1.Secret{})
	})
	createWebhookConfig(t, o.WebhookConfigName)
	bundleSet := func() error {
		if got, want := bundleOf(t, o), getSecret(t, o).Data["ca.crt"]; string(got) != string(want) {
			return errors.New("caBundle not set")
		}
		return nil
	}
	eventually(t, 10*time.Second, bundleSet)

	// Passes go on after a successful one: a cleared caBundle comes back.
	cfg := getConfig(t, o)
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = nil
	}
	if err := k8s.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, bundleSet)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v, want nil once ctx ends", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start still running 5s after ctx ended")
	}
}
