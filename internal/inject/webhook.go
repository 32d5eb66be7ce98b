package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/redislock/redislock/api/v1alpha1"
)

// Path is where the webhook server serves the Webhook.
const Path = "/mutate-v1-pod"

// Pods are mutated on create only. An unreachable webhook fails their
// creation (failurePolicy=fail; their ReplicaSet or Job retries): it is
// called only for pods with the annotation, and without the agent such a
// pod would never lead, and with redislock.io/run-container would run its
// command unguarded.
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=agent.redislock.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5

// Webhook injects the agent into the pods that ask for it.
type Webhook struct {
	// Reader reads RedisLocks. Use an uncached reader (the manager's
	// APIReader): a pod created right after its RedisLock must find it.
	Reader client.Reader
	// Agent is what the webhook injects.
	Agent Agent
	// Class is the lock class of this webhook's controller: it injects
	// only for RedisLocks labelled v1alpha1.ClassLabel with it ("": those
	// without the label), and admits other pods untouched, for the
	// webhook of their class.
	Class string

	decoder admission.Decoder
}

// NewWebhook returns a Webhook that decodes with scheme (which needs
// core/v1) and injects agent for the RedisLocks of class.
func NewWebhook(r client.Reader, scheme *runtime.Scheme, agent Agent, class string) (*Webhook, error) {
	switch {
	case agent.Image == "":
		return nil, fmt.Errorf("inject: the agent image is empty")
	case agent.ClusterID == "":
		return nil, fmt.Errorf("inject: the cluster identity is empty")
	}
	return &Webhook{Reader: r, Agent: agent, Class: class, decoder: admission.NewDecoder(scheme)}, nil
}

// Handle implements admission.Handler.
func (w *Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := w.decoder.Decode(req, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("inject: decode pod: %w", err))
	}
	in, ok, err := Requested(&pod)
	switch {
	case !ok:
		return admission.Allowed("no " + LockAnnotation + " annotation")
	case Injected(&pod):
		return admission.Allowed("agent already injected")
	case err != nil:
		return admission.Denied(err.Error())
	}
	var rl v1alpha1.RedisLock
	ref := types.NamespacedName{Namespace: req.Namespace, Name: in.Lock}
	if err := w.Reader.Get(ctx, ref, &rl); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Denied(fmt.Sprintf("annotation %s: RedisLock %q not found in namespace %q; create it, or remove the annotation", LockAnnotation, in.Lock, req.Namespace))
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("inject: get RedisLock %s: %w", ref, err))
	}
	if class := rl.Labels[v1alpha1.ClassLabel]; class != w.Class {
		return admission.Allowed(fmt.Sprintf("RedisLock %s is of lock class %q, not %q: the webhook of its class injects the agent", in.Lock, class, w.Class))
	}
	Apply(&pod, in, w.Agent)
	mutated, err := json.Marshal(&pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("inject: encode pod: %w", err))
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	if c := meta.FindStatusCondition(rl.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != "True" {
		resp = resp.WithWarnings(fmt.Sprintf("RedisLock %s is not Ready (%s: %s); the agent waits for it", in.Lock, c.Reason, c.Message))
	}
	return resp
}
