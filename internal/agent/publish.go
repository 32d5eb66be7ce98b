package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	var label labelState
	t := a.o.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
			a.pass(final, &label)
			cancel()
			return
		case <-changed:
		case <-t.C():
		}
		a.pass(ctx, &label)
		t.Stop()
		t.Reset(interval)
	}
}

// labelState is what publish remembers of the pod label between passes.
type labelState struct {
	written string // the value last written; "" before the first write
	failure string // the error of the last failed write, "" after a success
}

// pass writes the current status to the label (if it changed since it was
// last written) and the file. Failures are logged and retried by the next
// pass.
func (a *Agent) pass(ctx context.Context, label *labelState) {
	st := a.status()
	if a.o.LabelPod {
		if want := strconv.FormatBool(st.Leading); want != label.written {
			switch err := a.label(ctx, want); {
			case err != nil && ctx.Err() != nil:
				// Stopping: the last pass, on a context of its own,
				// writes the label.
			case err != nil:
				a.labelFailed(label, err, want)
			default:
				label.written, label.failure = want, ""
			}
		}
	}
	if a.o.LeaderFile != "" {
		if err := writeStatus(a.o.LeaderFile, st); err != nil {
			a.o.Logger.Error(err, "cannot write the leader file")
		}
	}
}

// labelFailed logs err, the failure to set the label to value, unless the
// last write failed with the same error: a missing permission would
// otherwise be logged at every pass, and its cause is the same each time.
// Only an API server's refusal gets the hint about the role.
func (a *Agent) labelFailed(label *labelState, err error, value string) {
	if err.Error() == label.failure {
		return
	}
	label.failure = err.Error()
	msg := "cannot label the pod"
	if apierrors.IsForbidden(err) {
		msg += "; it needs patch on pods (the redislock-agent role)"
	}
	a.o.Logger.Error(err, msg, "label", LeaderLabel, "value", value)
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
func writeStatus(path string, st leaderhttp.Status) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := writeAtomic(path, 0o644, bytes.NewReader(append(data, '\n'))); err != nil {
		return fmt.Errorf("agent: leader file: %w", err)
	}
	return nil
}

// writeAtomic replaces path with what r reads, with mode, atomically: a
// reader of path sees the old content or the new, never a part.
func writeAtomic(path string, mode os.FileMode, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := io.Copy(tmp, r)
	if err = errors.Join(werr, tmp.Chmod(mode), tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
