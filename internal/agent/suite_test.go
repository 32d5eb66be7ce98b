package agent

import (
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// testEnv is the test API server, with the CRDs (the HTTP tests campaign
// for RedisLocks), and restConfig its administrator's config.
var (
	testEnv    = &envtest.Environment{}
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the API client logs nothing worth reading here
	testenv.Main(filepath.Join("..", ".."), testEnv, true, func(cfg *rest.Config) (int, error) {
		restConfig = cfg
		return m.Run(), nil
	})
}
