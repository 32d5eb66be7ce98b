// Package cluster tests the product as a user runs it, on the real
// single-node cluster of hack/cluster: `helm install` of the chart, an
// annotated Deployment whose pods get the agent as a native sidecar, the
// leader label moving as pods die, /leader answered from inside the pods,
// and the controller's own election in redislock mode.
//
// The tests run only when asked, since they need root and a cluster:
//
//	REDISLOCK_CLUSTER=up    go test ./test/cluster/   # against a cluster hack/cluster up started
//	REDISLOCK_CLUSTER=start go test ./test/cluster/   # brings one up first and down after
//
// $REDISLOCK_CLUSTER_DIR is the cluster's state directory, as for
// hack/cluster (default /tmp/redislock-cluster). Without REDISLOCK_CLUSTER
// every test is skipped.
package cluster
