package e2e

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// What a RedisLock may make the controller connect to, as the chart sets
// it: off by default; redisAccess passes the controller its flags (and
// gives its own lock a RedisConnection when inline spec.redis is off);
// networkPolicy.egress limits the pods' egress to the API server, DNS and
// the Redis networks listed, and refuses to render without the first or
// the last.
func TestHelmRedisAccessAndEgress(t *testing.T) {
	args := func(objs []map[string]any) []any {
		return at(object(t, objs, "Deployment"), "spec.template.spec.containers.0.args").([]any)
	}
	egressPolicy := func(objs []map[string]any) map[string]any {
		for _, o := range objs {
			if o["kind"] == "NetworkPolicy" && strings.HasSuffix(at(o, "metadata.name").(string), "-controller-egress") {
				return o
			}
		}
		return nil
	}

	defaults := render(t, chartDir())
	for _, a := range args(defaults) {
		if s := a.(string); strings.HasPrefix(s, "-allow-inline-redis") || strings.HasPrefix(s, "-redis-allowed-destinations") {
			t.Errorf("by default the controller gets %s; want neither flag (anything allowed)", s)
		}
	}
	if p := egressPolicy(defaults); p != nil {
		t.Errorf("by default an egress NetworkPolicy: %s", asYAML(p))
	}

	objs := render(t, chartDir(),
		"--set", "redisAccess.allowInline=false", "--set", "redisAccess.allowedDestinations={10.20.0.0/16,redis.example.com}",
		"--set", "networkPolicy.egress.enabled=true", "--set", "networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.5/32",
		"--set", "networkPolicy.egress.redisCIDRs={10.20.0.0/16,10.30.0.0/16}", "--set", "networkPolicy.egress.redisPorts={6379}",
		"--set", "leaderElection.mode=redislock", "--set", "redis.addrs={redis.redis.svc:6379}", "--set", "redis.existingSecret=redis-auth")
	for _, want := range []string{"-allow-inline-redis=false", "-redis-allowed-destinations=10.20.0.0/16,redis.example.com"} {
		if !slices.Contains(args(objs), any(want)) {
			t.Errorf("controller args %v; want %s", args(objs), want)
		}
	}
	p := egressPolicy(objs)
	if p == nil {
		t.Fatal("no egress NetworkPolicy with networkPolicy.egress.enabled")
	}
	tcp := func(port float64) map[string]any { return map[string]any{"protocol": "TCP", "port": port} }
	want := map[string]any{
		"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "redislock", "app.kubernetes.io/instance": "rl", "app.kubernetes.io/component": "controller"}},
		"policyTypes": []any{"Egress"},
		"egress": []any{
			map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.5/32"}}}, "ports": []any{tcp(443), tcp(6443)}},
			map[string]any{
				"to": []any{map[string]any{
					"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
					"podSelector":       map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-dns"}}}},
				"ports": []any{map[string]any{"protocol": "UDP", "port": float64(53)}, tcp(53)}},
			map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.20.0.0/16"}}, map[string]any{"ipBlock": map[string]any{"cidr": "10.30.0.0/16"}}},
				"ports": []any{tcp(6379)}},
		},
	}
	if got := at(p, "spec"); !reflect.DeepEqual(got, want) {
		t.Errorf("egress NetworkPolicy spec:\n%s\nwant\n%s", asYAML(got), asYAML(want))
	}
	lock := byName(t, objs, "RedisLock", "rl-redislock-leader")
	if got, want := at(lock, "spec.connectionRef"), map[string]any{"name": "rl-redislock-leader"}; !reflect.DeepEqual(got, want) || at(lock, "spec.redis") != nil {
		t.Errorf("the controller's own lock, inline spec.redis off: spec %s; want a connectionRef to its RedisConnection", asYAML(at(lock, "spec")))
	}
	conn := byName(t, objs, "RedisConnection", "rl-redislock-leader")
	if got, want := at(conn, "spec"), map[string]any{"mode": "Standalone", "addrs": []any{"redis.redis.svc:6379"},
		"passwordSecretRef": map[string]any{"name": "redis-auth", "key": "password"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("its RedisConnection: spec %s; want %s", asYAML(got), asYAML(want))
	}

	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"networkPolicy.egress.enabled=true", "networkPolicy.egress.redisCIDRs={10.20.0.0/16}"}, "networkPolicy.egress.enabled needs networkPolicy.egress.apiServer"},
		{[]string{"networkPolicy.egress.enabled=true", "networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.5/32"}, "networkPolicy.egress.enabled needs networkPolicy.egress.redisCIDRs"},
		{[]string{"networkPolicy.egress.redisCIDRs={10.20.0.0}"}, "/networkPolicy/egress/redisCIDRs/0"},
		{[]string{"redisAccess.allowedDestinations={redis://a:6379}"}, "/redisAccess/allowedDestinations/0"},
	} {
		a := []string{"template", "rl", chartDir()}
		for _, s := range c.set {
			a = append(a, "--set", s)
		}
		if out, err := helm(t, a...); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("--set %v: %v, %q; want an error naming %s", c.set, err, strings.TrimSpace(out), c.want)
		}
	}
}
