package redisconn

import (
	"testing"
	"time"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redislock"
)

// The API server leaves an unset renewInterval and renewDeadline unset:
// Timing derives them from ttl, as redislock.Timing's defaults do, so the
// plugin's client-go durations and the agent's publishing period are the
// ones in effect, never zero.
func TestTimingDerivesUnsetFieldsFromTTL(t *testing.T) {
	dur := func(d time.Duration) *v1alpha1.Duration { return &v1alpha1.Duration{Duration: d} }
	tests := []struct {
		name string
		spec v1alpha1.RedisLockSpec
		want redislock.Timing
	}{
		{"ttl alone", v1alpha1.RedisLockSpec{TTL: dur(5 * time.Second)},
			redislock.Timing{TTL: 5 * time.Second, RenewInterval: 666666666, RenewDeadline: 3333333333}},
		{"the default ttl", v1alpha1.RedisLockSpec{},
			redislock.Timing{TTL: 15 * time.Second, RenewInterval: 2 * time.Second, RenewDeadline: 10 * time.Second}},
		{"renewInterval set", v1alpha1.RedisLockSpec{TTL: dur(30 * time.Second), RenewInterval: dur(time.Second)},
			redislock.Timing{TTL: 30 * time.Second, RenewInterval: time.Second, RenewDeadline: 20 * time.Second}},
		{"renewDeadline set", v1alpha1.RedisLockSpec{TTL: dur(30 * time.Second), RenewDeadline: dur(25 * time.Second)},
			redislock.Timing{TTL: 30 * time.Second, RenewInterval: 4 * time.Second, RenewDeadline: 25 * time.Second}},
		{"all set", v1alpha1.RedisLockSpec{TTL: dur(3 * time.Second), RenewInterval: dur(300 * time.Millisecond), RenewDeadline: dur(2 * time.Second)},
			redislock.Timing{TTL: 3 * time.Second, RenewInterval: 300 * time.Millisecond, RenewDeadline: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Timing(&v1alpha1.RedisLock{Spec: tt.spec}); got != tt.want {
				t.Fatalf("Timing = %+v, want %+v", got, tt.want)
			}
		})
	}
}
