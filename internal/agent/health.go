package agent

import (
	"context"
	"errors"
)

// errNotProbed is the app's health until the first check: the agent does
// not campaign for an app it has not seen healthy.
var errNotProbed = errors.New("not checked yet")

// probeHealth checks Options.Health every HealthPeriod until ctx ends,
// and keeps a.health: one check (an HTTP GET or a stat) a period, nothing
// sent to Redis or the API server (see healthSetter).
func (a *Agent) probeHealth(ctx context.Context, notify func()) {
	set := a.healthSetter(notify)
	t := a.o.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		checked, cancel := context.WithTimeout(ctx, a.o.HealthPeriod)
		err := a.probe.Check(checked)
		cancel()
		if ctx.Err() != nil {
			return
		}
		set(err)
		t.Reset(a.o.HealthPeriod)
	}
}

// healthSetter returns the function that records each verdict on the
// app's health (nil: healthy) in a.health. A change of verdict is logged
// once, and notifies the long polls of /leader, whose error says why the
// agent does not campaign. Its calls must not overlap.
func (a *Agent) healthSetter(notify func()) func(error) {
	last := errNotProbed.Error()
	return func(err error) {
		a.health.Set(err)
		why := ""
		if err != nil {
			why = err.Error()
		}
		if why != last {
			a.o.Logger.Info("app health", "healthy", err == nil, "signal", a.probe.String(), "reason", why)
			last = why
			notify()
		}
	}
}
