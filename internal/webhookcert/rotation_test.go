package webhookcert_test

import (
	"testing"
	"time"
)

const (
	caValidity   = 90 * 24 * time.Hour
	certValidity = 30 * 24 * time.Hour
)

func TestServingCertRenewedAtTwoThirdsOfItsLifeUnderTheSameCA(t *testing.T) {
	clk := newClock()
	o := newFixture(t, clk)
	o.CAValidity, o.CertValidity = caValidity, certValidity
	m := newManager(t, o)
	ensure(t, m)
	first := getSecret(t, o).Data

	clk.Step(certValidity*2/3 - time.Minute)
	ensure(t, m)
	if string(readFile(t, o, "tls.crt")) != string(first["tls.crt"]) {
		t.Fatal("serving certificate renewed before two thirds of its life")
	}

	clk.Step(2 * time.Minute)
	ensure(t, m)
	s := getSecret(t, o)
	crt := readFile(t, o, "tls.crt")
	if string(crt) == string(first["tls.crt"]) || string(crt) != string(s.Data["tls.crt"]) {
		t.Fatal("serving certificate not renewed past two thirds of its life")
	}
	if string(s.Data["ca.crt"]) != string(first["ca.crt"]) {
		t.Error("the CA was replaced with the serving certificate")
	}
	verify(t, crt, bundleOf(t, o), clk.Now())
}

func TestCARotationKeepsTheOldCATrustedUntilItExpires(t *testing.T) {
	clk := newClock()
	o := newFixture(t, clk)
	o.CAValidity, o.CertValidity = caValidity, certValidity
	m := newManager(t, o)
	ensure(t, m)
	oldCA := getSecret(t, o).Data["ca.crt"]

	// Just before the CA is due, the last certificate it signs: what a
	// replica that has not seen the rotation yet still serves.
	clk.Step(caValidity*2/3 - time.Minute)
	ensure(t, m)
	if ca := getSecret(t, o).Data["ca.crt"]; string(ca) != string(oldCA) {
		t.Fatal("CA replaced before two thirds of its life")
	}
	oldCert := readFile(t, o, "tls.crt")

	clk.Step(2 * time.Minute)
	ensure(t, m)
	s := getSecret(t, o)
	if string(s.Data["ca.crt"]) == string(oldCA) {
		t.Fatal("CA not replaced past two thirds of its life")
	}
	if string(s.Data["ca-previous.crt"]) != string(oldCA) {
		t.Error("ca-previous.crt is not the replaced CA")
	}
	bundle := bundleOf(t, o)
	if want := string(s.Data["ca.crt"]) + string(oldCA); string(bundle) != want {
		t.Errorf("caBundle holds %d certificates, want the new CA then the old one", len(parseCerts(t, bundle)))
	}
	newCert := readFile(t, o, "tls.crt")
	verify(t, newCert, bundle, clk.Now())
	verify(t, oldCert, bundle, clk.Now())
	verify(t, newCert, s.Data["ca.crt"], clk.Now())

	// The old CA stays in the bundle until it expires, not a pass longer.
	clk.Step(caValidity/3 - 2*time.Minute)
	ensure(t, m)
	if got := len(parseCerts(t, bundleOf(t, o))); got != 2 {
		t.Errorf("caBundle holds %d certificates just before the old CA expires, want 2", got)
	}
	clk.Step(2 * time.Minute)
	ensure(t, m)
	s = getSecret(t, o)
	if _, ok := s.Data["ca-previous.crt"]; ok {
		t.Error("the expired CA is still in the secret")
	}
	if bundle := bundleOf(t, o); string(bundle) != string(s.Data["ca.crt"]) {
		t.Errorf("caBundle holds %d certificates after the old CA expired, want the current CA only", len(parseCerts(t, bundle)))
	}
	verify(t, readFile(t, o, "tls.crt"), bundleOf(t, o), clk.Now())
}
