// Package crds pins the API packages that hack/ensure-tools.sh generates
// CRDs from.
package crds

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)
