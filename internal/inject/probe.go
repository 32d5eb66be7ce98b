package inject

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ProbeReview is an AdmissionReview, as the API server sends it, for a pod
// without the lock annotation, which the Webhook allows untouched, under a
// fresh UID: what a client POSTs to Path to learn whether the webhook
// answers (redislock webhook-wait). CheckProbeAnswer judges the answer.
func ProbeReview() (types.UID, []byte, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	uid := types.UID("probe-" + hex.EncodeToString(b))
	pod, err := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "redislock-webhook-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "none"}}},
	})
	if err != nil {
		return "", nil, err
	}
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: pod},
		},
	})
	return uid, review, err
}

// CheckProbeAnswer says why body, the answer to the ProbeReview of uid
// with HTTP status code, is not the webhook's allowing it (nil if it is):
// the API server would not take it as such either.
func CheckProbeAnswer(uid types.UID, code int, body []byte) error {
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &got); err != nil || got.Response == nil {
		return fmt.Errorf("HTTP %d, not an AdmissionReview with a response: %.200q", code, body)
	}
	if got.Response.UID != uid || !got.Response.Allowed {
		return fmt.Errorf("HTTP %d, uid %q allowed %v (%v), want uid %q allowed", code, got.Response.UID, got.Response.Allowed, got.Response.Result, uid)
	}
	return nil
}
