package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
)

// The cluster's fixed addresses, all inside the network namespace it makes.
const (
	nodeName     = "redislock-node"
	nodeIP       = "10.233.0.2" // on rl0, a veth whose peer stays down
	nodeCIDR     = nodeIP + "/24"
	serviceCIDR  = "10.96.0.0/16"
	apiServiceIP = "10.96.0.1" // the kubernetes Service
	podCIDR      = "10.244.0.0/24"
	apiPort      = 6443
	redisPort    = 6379
	// defaultDir is the state directory unless -dir says otherwise.
	defaultDir = "/tmp/redislock-cluster"
)

// Images imported into containerd. The product's is the chart's default
// (its repository and appVersion), so `helm install` needs no image values.
const (
	pauseImage = "redislock.local/pause:v1"
	appImage   = "redislock.local/app:v1"
)

// State is what up records in <dir>/cluster.json for down and for the tests.
type State struct {
	// Kubeconfig is the admin's, reaching the API server from the host
	// through a loopback port the cluster forwards.
	Kubeconfig string `json:"kubeconfig"`
	// RedisAddr is the Redis the cluster runs, as pods reach it.
	RedisAddr string `json:"redisAddr"`
	// HostRedisAddr is the same Redis from the host (a loopback port).
	HostRedisAddr string `json:"hostRedisAddr"`
	// ProductImage, PauseImage, AppImage and PythonImage are the
	// imported images.
	ProductImage string `json:"productImage"`
	PauseImage   string `json:"pauseImage"`
	AppImage     string `json:"appImage"`
	PythonImage  string `json:"pythonImage"`
	// Pid is unshare's: the namespaces live as long as it does.
	Pid int `json:"pid"`
	// PidNS is the link of /proc/<node>/ns/pid, to check nothing is left.
	PidNS string `json:"pidNS"`
}

// dirs is the cluster's directory tree below its state directory.
type dirs string

func (d dirs) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}
func (d dirs) state() string          { return d.path("cluster.json") }
func (d dirs) log(name string) string { return d.path("logs", name+".log") }
func (d dirs) pki(name string) string { return d.path("pki", name) }

// cgroupRoot is the kubelet's cgroup root in every host hierarchy, made by
// up and removed with everything below it by down: redislock-cluster for
// the default state directory, and for another a name of its own (a hash of
// the path), so that two clusters never share one (the tests interrupt an
// up of their own while theirs runs).
func (d dirs) cgroupRoot() string {
	if d == defaultDir {
		return "redislock-cluster"
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(d))
	return fmt.Sprintf("redislock-cluster-%08x", h.Sum32())
}

func (d dirs) readState() (*State, error) {
	b, err := os.ReadFile(d.state())
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", d.state(), err)
	}
	return &s, nil
}

func (d dirs) writeState(s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(d.state(), append(b, '\n'), 0o600)
}
