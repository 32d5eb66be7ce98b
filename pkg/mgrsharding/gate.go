package mgrsharding

import (
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/redislock/redislock/pkg/election"
)

// Gate returns a copy of cfg whose mutating requests made under a
// reconcile of this Sharding (a context from Reconciler) are sent only
// while Valid says that reconcile's shard is held: not once the shard is
// being handed over, nor past its step-down deadline. A refused write gets
// the Conflict API error that election.IsNotLeading finds, and never
// reaches the API server. Requests with no shard in their context pass
// (those of single-leader controllers in the same manager, say), as do
// reads. Give the gated config to the manager.
func (s *Sharding) Gate(cfg *rest.Config) *rest.Config {
	return election.GateFunc(cfg, s.name, func(req *http.Request) bool {
		c, ok := req.Context().Value(claimKey{}).(claim)
		return !ok || c.s != s || Valid(req.Context()) == nil
	})
}
