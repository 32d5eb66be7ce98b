// Package v1alpha1 holds the RedisLock API, group redislock.io, version
// v1alpha1.
// +kubebuilder:object:generate=true
// +groupName=redislock.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "redislock.io", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &RedisLock{}, &RedisLockList{}, &RedisConnection{}, &RedisConnectionList{}, &ClusterRedisConnection{}, &ClusterRedisConnectionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
