package main

import (
	"fmt"
	"strings"
)

// writeFencing writes the section of server-side fencing: the policy's lag
// behind a handover, the writes it let through or refused meanwhile, and
// the waits of the candidates that lead only once admitted.
func writeFencing(w *strings.Builder, f *fencing) {
	fmt.Fprintf(w, "The ValidatingAdmissionPolicy `redislock-fencing` (config/policy/fencing.yaml) on an envtest kube-apiserver, with the controller showing the holder and a real redis-server; two pods of the fenced service account write (server dry-run creates of ConfigMaps) with tokens bound to them, as raw clients with no write gate. %d handovers, each by the holder's key expiring (a leader paused past its ttl), timing %s (TestFencingPolicyAdmitsOnlyTheHolder of `test/e2e`). From each grant on, both pods write back to back, each until its verdict turns.\n\n", f.Handovers, f.Timing)
	fmt.Fprintln(w, "| from the new holder's grant | p50 | p99 | writes meanwhile |")
	fmt.Fprintln(w, "|---|---:|---:|---|")
	fmt.Fprintf(w, "| the new holder's first write admitted | %s | %s | %d of its %d writes refused before |\n",
		seconds(quantile(f.AdmitSeconds, 0.5)), seconds(quantile(f.AdmitSeconds, 0.99)), f.HolderRefused, f.HolderWrites)
	fmt.Fprintf(w, "| the deposed holder's first write refused | %s | %s | %d of its %d writes admitted before |\n",
		seconds(quantile(f.RefuseSeconds, 0.5)), seconds(quantile(f.RefuseSeconds, 0.99)), f.DeposedAdmitted, f.DeposedWrites)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each API server evaluates the policy against its own cache of the RedisLock: for the lag above, a deposed holder's writes pass. It is a second wall behind the write gate, not a linearizable fence.")
	if len(f.Candidates) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Candidates that lead only once the API server shows them as the holder (the plugin's `mgrelection.WithFencing`, the agent's `-fencing`): each wrote the instant it led, and every such write was admitted (the tests fail otherwise).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| candidate | handovers | from | to leading, p50 | p99 |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|")
	for _, c := range f.Candidates {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", methodLabel(c.Method), len(c.WaitSeconds), c.Handover,
			seconds(quantile(c.WaitSeconds, 0.5)), seconds(quantile(c.WaitSeconds, 0.99)))
	}
}
