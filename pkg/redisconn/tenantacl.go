package redisconn

import (
	"strings"

	"github.com/redislock/redislock/pkg/redislock"
)

// tenantCommands are the commands a candidate sends, itself or from the
// lock scripts (which run as the calling user): the scripts' commands, the
// replication wait (ROLE, INFO, WAIT, CLUSTER NODES), the restart guard's
// reads (INFO, LASTSAVE), the events' subscriptions, what go-redis sends
// on connecting and to follow a Cluster, and PING.
var tenantCommands = []string{
	"eval", "evalsha", "script|load", "script|exists",
	"get", "set", "del", "mget", "incr", "decr", "pexpire", "pttl", "time", "lastsave", "info", "role", "wait",
	"publish", "spublish", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe",
	"ping", "hello", "auth", "select",
	"command", "cluster|nodes", "cluster|slots", "cluster|shards", "cluster|myid", "readonly", "asking",
}

// TenantACL returns the rules of a Redis user (ACL SETUSER <user> on
// ><password> <rules...>) confined to what a candidate of namespace's
// locks in the cluster clusterID needs, and for the Global lock names
// globals: the keys and event channels of those locks, the restart guard's
// epoch markers (shared by every lock on a node: see the limits in
// docs/security.md), and the commands in tenantCommands. Another
// namespace's locks, other Global names, the controller's own leader key
// (a lock of its namespace) and every other key are refused with NOPERM.
// The key prefix is redislock.DefaultKeyPrefix, which the controller, the
// agent and the plugin use. Names are glob-escaped: a Global name is
// matched literally.
func TenantACL(clusterID, namespace string, globals []string) []string {
	p := globEscape(redislock.DefaultKeyPrefix)
	rules := []string{"resetkeys", "resetchannels", "-@all"}
	// The lock P{<name>} and its P{<name>}:fence, :until and :meta keys;
	// its channel P{<name>}:events.
	scope := p + "{" + globEscape(clusterName(clusterID, namespace, "")) + "*"
	rules = append(rules, "~"+scope, "&"+scope)
	for _, g := range globals {
		lock := p + "{" + globEscape(globalName(g)) + "}"
		rules = append(rules, "~"+lock, "~"+lock+":*", "&"+lock+":events")
	}
	// The epoch marker: P + "epoch", or one per Cluster slot, P{<tag>}:epoch.
	rules = append(rules, "~"+p+"epoch", "~"+p+"{*}:epoch")
	for _, c := range tenantCommands {
		rules = append(rules, "+"+c)
	}
	return rules
}

// TenantUser is the name TenantACL's user has by convention, as the docs
// and `redislock tenant-acl` use it: "redislock-<namespace>".
func TenantUser(namespace string) string { return "redislock-" + namespace }

// globEscape escapes the characters Redis glob patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
