package controller

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/redislock/redislock/api/v1alpha1"
)

// ErrInvalidClass means a -lock-class is no valid label value.
var ErrInvalidClass = errors.New("controller: invalid lock class")

// ClassSelector selects the RedisLocks of class: those labelled
// v1alpha1.ClassLabel=class, or for "" those without the label.
func ClassSelector(class string) (labels.Selector, error) {
	op, values := selection.Equals, []string{class}
	if class == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(v1alpha1.ClassLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidClass, class, err)
	}
	return labels.NewSelector().Add(*req), nil
}
