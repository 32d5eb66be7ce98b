package controllers

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ClassLabel assigns a RedisLock to the controllers started with the same
// -lock-class, so that several installations can share a cluster, each
// reconciling its own RedisLocks.
const ClassLabel = "redislock.io/class"

// ErrInvalidClass means a -lock-class is no valid label value.
var ErrInvalidClass = errors.New("controllers: invalid lock class")

// ClassSelector selects the RedisLocks of class: those labelled
// ClassLabel=class, or for "" those without the label.
func ClassSelector(class string) (labels.Selector, error) {
	op, values := selection.Equals, []string{class}
	if class == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(ClassLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidClass, class, err)
	}
	return labels.NewSelector().Add(*req), nil
}
