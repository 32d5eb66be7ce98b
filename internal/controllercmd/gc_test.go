package controllercmd

import (
	"runtime/debug"
	"testing"
)

// The controller collects at gcPercent unless GOGC says otherwise.
func TestTheControllerCollectsAtItsGCPercentUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	collectAtGCPercent(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GC percent %d without GOGC; want %d", got, gcPercent)
	}
	collectAtGCPercent(func(k string) (string, bool) { return "200", k == "GOGC" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with GOGC set; want the runtime's (100 here) left alone", got)
	}
}
