package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/leaderhttp"
)

// publish keeps the pod label and the leader file current: a pass on every
// change of leadership and every interval (so the file's validUntil follows
// the renewals, and a failed label patch is retried at that pace), and a
// last pass, bounded by finalWriteTimeout, when ctx ends.
func (a *Agent) publish(ctx context.Context, changed <-chan struct{}, interval time.Duration) {
	if !a.o.LabelPod && a.o.LeaderFile == "" {
		return
	}
	labeled := "" // the label value last written
	t := a.o.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
			a.pass(final, &labeled)
			cancel()
			return
		case <-changed:
		case <-t.C():
		}
		a.pass(ctx, &labeled)
		t.Stop()
		t.Reset(interval)
	}
}

// pass writes the current status to the label (if it changed since
// *labeled) and the file. Failures are logged and retried by the next pass.
func (a *Agent) pass(ctx context.Context, labeled *string) {
	st := a.status()
	if a.o.LabelPod {
		if want := strconv.FormatBool(st.Leading); want != *labeled {
			if err := a.label(ctx, want); err != nil {
				a.o.Logger.Error(err, "cannot label the pod; it needs patch on pods (the redislock-agent role)", "label", LeaderLabel, "value", want)
			} else {
				*labeled = want
			}
		}
	}
	if a.o.LeaderFile != "" {
		if err := writeStatus(a.o.LeaderFile, st); err != nil {
			a.o.Logger.Error(err, "cannot write the leader file")
		}
	}
}

// label sets LeaderLabel on the agent's pod to v.
func (a *Agent) label(ctx context.Context, v string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LeaderLabel: v}}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: a.o.Identity, Namespace: a.o.Lock.Namespace}}
	if err := a.c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("agent: label pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// writeStatus replaces path with st as JSON, atomically: a reader sees the
// old content or the new, never a part.
func writeStatus(path string, st leaderhttp.Status) (err error) {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("agent: leader file: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	if err = errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("agent: leader file: %w", err)
	}
	return nil
}
