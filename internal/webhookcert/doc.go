// Package webhookcert issues and rotates the serving certificate of the
// controller's mutating admission webhook without cert-manager.
//
// A [Manager] keeps three things consistent with one Secret of type
// kubernetes.io/tls, which is the single source of truth shared by all
// replicas:
//
//   - the Secret holds a CA (ca.crt, ca.key) and a serving certificate signed
//     by it (tls.crt, tls.key) whose SANs cover Options.Hosts;
//   - every webhook of the MutatingWebhookConfiguration trusts that CA
//     through its clientConfig.caBundle;
//   - Options.CertDir holds the same tls.crt and tls.key, which
//     controller-runtime's webhook server reloads through its certwatcher.
//
// Every write is conditional (Create fails if the Secret exists, Update if
// it changed since it was read), so replicas that race converge on whatever
// the winner stored: a loser re-reads and adopts it, it never overwrites it.
// Replicas sharing the Secret should agree on Options.Hosts: one whose
// hosts the stored certificate does not all cover reissues it for its own,
// so adding a host in a rollout takes one reissue, but two replicas that
// each need a host the other lacks reissue on every pass.
//
// # Rotation
//
// The serving certificate is reissued when less than a third of
// Options.CertValidity remains, when it no longer covers every host, or when
// it was not signed by the stored CA. The CA is replaced when less than a
// third of Options.CAValidity remains or when it is unusable, and the serving
// certificate with it. The CA it replaces moves to the Secret key
// ca-previous.crt and the caBundle holds both (new first) until the old CA
// expires; then Ensure drops it. So replicas that still serve a certificate
// signed by the old CA stay trusted until their next pass picks up the new
// one, which is at most Options.CheckInterval later.
//
// Within a pass the caBundle is written before the files, so the API server
// trusts a new CA before this replica serves a certificate it signed. The
// files are written even when the caBundle cannot be, so the webhook server
// can start before its configuration exists.
//
// Not guaranteed: a replica that read the Secret just before another replaced
// the CA can write the shorter bundle back, until its own next pass; replicas'
// files may differ for up to Options.CheckInterval after a renewal (both
// certificates are valid and trusted then).
//
// # Why not open-policy-agent/cert-controller
//
// cert-controller's rotator, the common library for this job, replaces
// ca.crt with a new CA when the old one is near its end and sets every
// caBundle to the current ca.crt alone: from then on the API server
// rejects every replica still serving a certificate signed by the old CA,
// until that replica's files catch up (its RestartOnSecretRefresh option
// restarts the pod to shorten the gap). This Manager keeps the replaced CA
// in the bundle until it expires, so no admission call fails during a
// rotation; that overlap is why it stays. Switching would need
// cert-controller to keep the old CA in the bundle, and would bring its
// dependencies (github.com/pkg/errors, go.uber.org/atomic) and its
// namespaced cache of Secrets.
//
// # Use
//
// Call [Manager.Ensure] once before the controller-runtime manager starts,
// so the webhook server finds its files, then add the Manager with mgr.Add:
// it repeats Ensure on every replica, leader or not. The client must be
// uncached (made with client.New): the manager's cache would need list and
// watch on every Secret. The RBAC it needs is in markers above Ensure.
package webhookcert
