package agent

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// testEnv is the test API server (no CRDs: the tests here touch pods only),
// and restConfig its administrator's config.
var (
	testEnv    = &envtest.Environment{}
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	testenv.Main(filepath.Join("..", ".."), testEnv, false, func(cfg *rest.Config) (int, error) {
		restConfig = cfg
		return m.Run(), nil
	})
}
