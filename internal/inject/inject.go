package inject

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/healthprobe"
)

const (
	// LockAnnotation on a pod (or a pod template) names the RedisLock, in
	// the pod's namespace, that its replicas campaign for.
	LockAnnotation = "redislock.io/lock"
	// PortAnnotation optionally sets the agent's HTTP port, when the
	// default DefaultPort is taken in the pod.
	PortAnnotation = "redislock.io/agent-port"
	// ProbePortAnnotation optionally gives the agent's /healthz (its
	// probes) and /metrics a port of their own, and keeps /leader on
	// 127.0.0.1 at the agent's port: then only the pod's own containers
	// can ask /leader (and hold its long polls), and the kubelet and
	// Prometheus reach the probe port. Unset, all three are served on
	// every address at the agent's port.
	ProbePortAnnotation = "redislock.io/agent-probe-port"
	// LabelPodAnnotation set to "false" leaves the pod label
	// redislock.io/leader off, so the pod's service account needs no patch
	// on pods; "true", the default, keeps it. Other values are rejected.
	LabelPodAnnotation = "redislock.io/label-pod"
	// RunContainerAnnotation names an app container to run only while
	// the pod leads: the webhook wraps its command in `redislock agent --`,
	// which campaigns in its place (no sidecar then). The container must
	// set its command in the pod spec: the webhook cannot see its image's
	// entrypoint.
	RunContainerAnnotation = "redislock.io/run-container"
	// HealthAnnotation gates the pod's leadership on its app's health: a
	// signal the agent checks every second, http://HOST:PORT/PATH
	// (healthy on a status from 200 to 399; the agent shares the pod's
	// network, so 127.0.0.1 reaches the app) or file:/PATH (healthy while
	// the file exists, in a volume the app and the agent share) or
	// "ready" (while the pod's app containers are Ready in its status,
	// which the agent watches; the pod's service account then needs the
	// redislock-agent-pod-reader ClusterRole bound). The pod
	// campaigns only while its app is healthy, and its agent steps down
	// (releases) once the app has been unhealthy for
	// StepDownAfterAnnotation.
	HealthAnnotation = "redislock.io/health"
	// StepDownAfterAnnotation is how long a leader's app may stay
	// unhealthy before its agent steps down, as a Go duration ("30s");
	// default the lock's ttl. Only with HealthAnnotation.
	StepDownAfterAnnotation = "redislock.io/step-down-after"
	// FencingAnnotation set to "true" makes the agent lead only once the
	// RedisLock's status names the pod as the holder, which the admission
	// policy redislock-fencing admits the pod's writes by; "false", the
	// default, leads at the grant. Other values are rejected.
	FencingAnnotation = "redislock.io/fencing"
	// ContainerName is the injected agent container's name: the sidecar,
	// or with RunContainerAnnotation the init container that installs the
	// agent's binary for the wrapped container.
	ContainerName = agentflags.ContainerName
	// BinVolumeName is the volume that carries the agent's binary to a
	// wrapped container.
	BinVolumeName = "redislock-bin"
	// BinPath is where a wrapped container finds the agent's binary.
	BinPath = "/var/run/redislock-bin/redislock"
	// DefaultPort is the agent's HTTP port unless PortAnnotation says
	// otherwise.
	DefaultPort = agentflags.Port
	// VolumeName is the shared volume that holds the leader file.
	VolumeName = "redislock"
	// MountPath is where the agent and every app container see VolumeName.
	MountPath = "/var/run/redislock"
	// LeaderFile is the leader file's path in the containers.
	LeaderFile = MountPath + "/leader.json"
	// LeaderURLEnv is set in every app container to the agent's /leader URL.
	LeaderURLEnv = "REDISLOCK_LEADER_URL"
	// LeaderFileEnv is set in every app container to LeaderFile, the path
	// of the file the agent keeps the /leader answer in.
	LeaderFileEnv = "REDISLOCK_LEADER_FILE"
	// IdentityEnv is set in every app container to the pod's name, the
	// identity the agent campaigns as (and the holder /leader names when
	// this pod leads).
	IdentityEnv = "REDISLOCK_IDENTITY"
)

// Injection is what a pod's annotations ask for.
type Injection struct {
	// Lock is the RedisLock's name.
	Lock string
	// Port is the agent's HTTP port.
	Port int32
	// ProbePort, when set, is the port of the agent's /healthz and
	// /metrics, on every address; /leader is then on 127.0.0.1 only.
	ProbePort int32
	// LabelPod makes the agent keep the pod's leader label current.
	LabelPod bool
	// RunContainer, when set, is the app container that runs only while
	// the pod leads.
	RunContainer string
	// Health, when set, is the health signal that gates the pod's
	// leadership, and StepDownAfter, when set, how long its app may stay
	// unhealthy while it leads.
	Health        string
	StepDownAfter time.Duration
	// Fencing makes the agent lead only once the API server shows it as
	// the holder.
	Fencing bool
}

// Requested reads the injection a pod asks for. ok is false when the pod
// does not carry LockAnnotation. An error names the annotation at fault.
func Requested(pod *corev1.Pod) (in Injection, ok bool, err error) {
	name, ok := pod.Annotations[LockAnnotation]
	if !ok {
		return Injection{}, false, nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Injection{}, true, fmt.Errorf("annotation %s: %q is not a RedisLock name: %s", LockAnnotation, name, errs[0])
	}
	in = Injection{Lock: name, LabelPod: true}
	if in.Port, err = annotatedPort(pod, PortAnnotation, DefaultPort); err != nil {
		return Injection{}, true, err
	}
	if in.ProbePort, err = annotatedPort(pod, ProbePortAnnotation, 0); err != nil {
		return Injection{}, true, err
	}
	if in.ProbePort == in.Port {
		return Injection{}, true, fmt.Errorf("annotation %s: %d is the agent's port too; the probes need a port of their own", ProbePortAnnotation, in.ProbePort)
	}
	if in.LabelPod, err = annotatedBool(pod, LabelPodAnnotation, true); err != nil {
		return Injection{}, true, err
	}
	if in.Fencing, err = annotatedBool(pod, FencingAnnotation, false); err != nil {
		return Injection{}, true, err
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, cp := range c.Ports {
			switch {
			case c.Name == ContainerName:
			case cp.ContainerPort == in.Port:
				return Injection{}, true, fmt.Errorf("container %s already uses port %d, the agent's; set annotation %s to a free port", c.Name, in.Port, PortAnnotation)
			case in.ProbePort != 0 && cp.ContainerPort == in.ProbePort:
				return Injection{}, true, fmt.Errorf("container %s already uses port %d, the agent's probes'; set annotation %s to a free port", c.Name, in.ProbePort, ProbePortAnnotation)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == VolumeName || v.Name == BinVolumeName {
			return Injection{}, true, fmt.Errorf("volume %s already exists; the agent needs that name", v.Name)
		}
	}
	if v, set := pod.Annotations[HealthAnnotation]; set {
		if _, err := healthprobe.Parse(v); err != nil {
			return Injection{}, true, fmt.Errorf("annotation %s: %w", HealthAnnotation, err)
		}
		in.Health = v
	}
	if v, set := pod.Annotations[StepDownAfterAnnotation]; set {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil || d <= 0:
			return Injection{}, true, fmt.Errorf("annotation %s: %q is not a positive duration, as 30s", StepDownAfterAnnotation, v)
		case in.Health == "":
			return Injection{}, true, fmt.Errorf("annotation %s: set without annotation %s, the health signal it applies to", StepDownAfterAnnotation, HealthAnnotation)
		}
		in.StepDownAfter = d
	}
	if name, set := pod.Annotations[RunContainerAnnotation]; set {
		i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
		switch {
		case i < 0:
			return Injection{}, true, fmt.Errorf("annotation %s: the pod has no container %q", RunContainerAnnotation, name)
		case in.Health == healthprobe.Ready:
			return Injection{}, true, fmt.Errorf("annotation %s: %q cannot gate a pod whose app runs only while it leads (annotation %s): the app is not Ready before it leads; use an http:// or file: signal", HealthAnnotation, healthprobe.Ready, RunContainerAnnotation)
		case len(pod.Spec.Containers[i].Command) == 0:
			return Injection{}, true, fmt.Errorf("annotation %s: container %s sets no command, so the webhook cannot wrap it (it cannot see the image's entrypoint); set its command (and args) in the pod spec", RunContainerAnnotation, name)
		}
		in.RunContainer = name
	}
	return in, true, nil
}

// annotatedPort returns the port number annotation name of pod gives, or
// dflt when pod does not carry it. The error names the annotation.
func annotatedPort(pod *corev1.Pod, name string, dflt int32) (int32, error) {
	p, set := pod.Annotations[name]
	if !set {
		return dflt, nil
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("annotation %s: %q is not a port number (1-65535)", name, p)
	}
	return int32(n), nil
}

// annotatedBool returns the "true" or "false" annotation name of pod
// gives, or dflt when pod does not carry it. The error names the
// annotation.
func annotatedBool(pod *corev1.Pod, name string, dflt bool) (bool, error) {
	v, set := pod.Annotations[name]
	if !set {
		return dflt, nil
	}
	if v != "true" && v != "false" {
		return false, fmt.Errorf("annotation %s: %q is neither \"true\" nor \"false\"", name, v)
	}
	return v == "true", nil
}

// Injected reports whether pod already has the agent.
func Injected(pod *corev1.Pod) bool {
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Name == ContainerName {
			return true
		}
	}
	return false
}

// Agent is the container the webhook injects.
type Agent struct {
	// Image is the agent's image, normally the controller's own.
	Image string
	// ClusterID is this cluster's identity, given to the agent so that it
	// needs no read of namespace kube-system.
	ClusterID string
	// Resources are the agent container's requests and limits (also those
	// of the init container that installs it for a wrapped container).
	Resources corev1.ResourceRequirements
}

// DefaultResources are the agent's requests and limits unless the
// controller is told otherwise: a campaigning agent idles at a few MiB and
// a few millicores.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
}

// Apply adds agent to pod, as in: the
// sidecar first among the init containers (so it serves before the app
// starts), or with in.RunContainer the wrapped container instead (see
// wrap); the shared volume; and in every other app container the volume
// (read-only), LeaderURLEnv, LeaderFileEnv and IdentityEnv. The caller
// checks Injected first.
func Apply(pod *corev1.Pod, in Injection, a Agent) {
	flags := agentflags.Flags{Lock: in.Lock, HTTPAddress: ":" + strconv.Itoa(int(in.Port)), LabelPod: in.LabelPod, LeaderFile: LeaderFile, ClusterID: a.ClusterID,
		Health: in.Health, StepDownAfter: in.StepDownAfter, Fencing: in.Fencing}
	// served is the port the kubelet and Prometheus reach.
	served := in.Port
	if in.ProbePort != 0 {
		served = in.ProbePort
		flags.HTTPAddress, flags.ProbeAddress = "127.0.0.1:"+strconv.Itoa(int(in.Port)), ":"+strconv.Itoa(int(in.ProbePort))
	}
	probe := func(failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(served)}},
			PeriodSeconds:    1,
			FailureThreshold: failures,
		}
	}
	args := append([]string{"agent"}, flags.Args()...)
	podName := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	agent := corev1.Container{
		Name:  ContainerName,
		Image: a.Image,
		Args:  args,
		Env: []corev1.EnvVar{
			{Name: agentflags.PodNameEnv, ValueFrom: podName},
			{Name: agentflags.PodNamespaceEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Ports:         []corev1.ContainerPort{{Name: "redislock", ContainerPort: served, Protocol: corev1.ProtocolTCP}},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		StartupProbe:  probe(30),
		LivenessProbe: probe(3),
		Resources:     *a.Resources.DeepCopy(),
		VolumeMounts:  []corev1.VolumeMount{{Name: VolumeName, MountPath: MountPath}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name:         VolumeName,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
	})
	if in.RunContainer != "" {
		wrap(pod, in, agent)
	} else {
		pod.Spec.InitContainers = append([]corev1.Container{agent}, pod.Spec.InitContainers...)
	}
	// 127.0.0.1, not localhost, which may name ::1 first: the agent's
	// /leader may listen on 127.0.0.1 alone.
	url := fmt.Sprintf("http://127.0.0.1:%d/leader", in.Port)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != in.RunContainer {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true})
		}
		c.Env = append(c.Env,
			corev1.EnvVar{Name: LeaderURLEnv, Value: url},
			corev1.EnvVar{Name: LeaderFileEnv, Value: LeaderFile},
			corev1.EnvVar{Name: IdentityEnv, ValueFrom: podName.DeepCopy()},
		)
	}
}

// wrap makes in.RunContainer run the agent, as agent (the sidecar it
// replaces) would, with the container's own command after "--": an init
// container copies the agent's binary into BinVolumeName (on disk: the
// binary would count against the pod's memory in a memory volume), and the
// wrapped container gets the agent's environment, port, probes and volume.
func wrap(pod *corev1.Pod, in Injection, agent corev1.Container) {
	install := corev1.Container{
		Name: ContainerName, Image: agent.Image, Args: []string{"agent-install", BinPath},
		Resources: agent.Resources, SecurityContext: agent.SecurityContext,
		VolumeMounts: []corev1.VolumeMount{{Name: BinVolumeName, MountPath: path.Dir(BinPath)}},
	}
	pod.Spec.InitContainers = append([]corev1.Container{install}, pod.Spec.InitContainers...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: BinVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == in.RunContainer })
	c := &pod.Spec.Containers[i]
	c.Command = slices.Concat([]string{BinPath}, agent.Args, []string{"--"}, c.Command)
	// The app runs only on the leader: its own probes would fail, restart
	// or keep unready every standby. The agent's /healthz answers instead;
	// readiness is left out, as for the sidecar.
	c.StartupProbe, c.LivenessProbe, c.ReadinessProbe = agent.StartupProbe, agent.LivenessProbe, nil
	c.Env = append(c.Env, agent.Env...)
	c.Ports = append(c.Ports, agent.Ports...)
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: VolumeName, MountPath: MountPath},
		corev1.VolumeMount{Name: BinVolumeName, MountPath: path.Dir(BinPath), ReadOnly: true})
}
