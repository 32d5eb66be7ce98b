package metricsauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/metricsauth"
	"github.com/redislock/redislock/internal/testing/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(filepath.Join("..", ".."), &envtest.Environment{}, false, func(c *rest.Config) (int, error) {
		cfg = c
		return m.Run(), nil
	})
}

// countingTransport counts the reviews a Guard sends, by path.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
	next  http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) counts() (tokenReviews, accessReviews int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths["/apis/authentication.k8s.io/v1/tokenreviews"], c.paths["/apis/authorization.k8s.io/v1/subjectaccessreviews"]
}

// serviceAccountToken makes a service account in ns and returns a token
// of it; with a ClusterRole bound, it may GET /metrics.
func serviceAccountToken(t *testing.T, admin kubernetes.Interface, ns, name string, reader bool) string {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if reader {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestGuardLetsThroughOnlyWhomTheAPIServerAuthorizes(t *testing.T) {
	admin := kubernetes.NewForConfigOrDie(cfg)
	// A namespace (and ClusterRole) of each run's own: go test -count=N
	// runs it again on the same API server.
	created, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "metricsauth-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	reader := serviceAccountToken(t, admin, ns, "prometheus", true)
	stranger := serviceAccountToken(t, admin, ns, "stranger", false)

	counted := &countingTransport{paths: map[string]int{}}
	guardCfg := rest.CopyConfig(cfg)
	guardCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counted.next = rt; return counted })
	clk := testingclock.NewFakePassiveClock(time.Now())
	guard := metricsauth.New(kubernetes.NewForConfigOrDie(guardCfg), clk, logr.Discard())
	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "redislock_locks 1\n")
	})))
	defer srv.Close()
	url := srv.URL + "/metrics"

	for _, c := range []struct {
		name, token string
		code        int
		body        string
	}{
		{"no token", "", http.StatusUnauthorized, "a bearer token is required"},
		{"a token the API server did not issue", "not-a-token", http.StatusUnauthorized, "does not authenticate"},
		{"a service account without the role", stranger, http.StatusForbidden, "system:serviceaccount:" + ns + ":stranger may not get /metrics"},
		{"a service account bound to the reader role", reader, http.StatusOK, "redislock_locks 1"},
	} {
		if code, body := get(t, url, c.token); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, code, body, c.code, c.body)
		}
	}
	tokens, access := counted.counts()
	if tokens != 3 || access != 2 {
		t.Errorf("4 requests, 3 of them with tokens, sent %d TokenReviews and %d SubjectAccessReviews, want 3 and 2", tokens, access)
	}

	// A scraper every 15 s for 10 minutes costs a TokenReview each time the
	// minute is over (at 75 s, 150 s, ...: 8) and a SubjectAccessReview
	// once the 5 minutes are (at 315 s: 1).
	for range 40 {
		clk.SetTime(clk.Now().Add(15 * time.Second))
		if code, body := get(t, url, reader); code != http.StatusOK {
			t.Fatalf("scrape: %d %q", code, body)
		}
	}
	moreTokens, moreAccess := counted.counts()
	if moreTokens-tokens != 8 || moreAccess-access != 1 {
		t.Errorf("40 scrapes over 10 minutes sent %d TokenReviews and %d SubjectAccessReviews, want 8 and 1", moreTokens-tokens, moreAccess-access)
	}
	t.Logf("40 scrapes over 10 minutes (fake clock): %d TokenReviews, %d SubjectAccessReviews", moreTokens-tokens, moreAccess-access)
}

func TestGuardAnswers500WhenTheAPIServerCannotReview(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	guard := metricsauth.New(kubernetes.NewForConfigOrDie(&rest.Config{Host: gone.URL, Timeout: 5 * time.Second}), testingclock.NewFakePassiveClock(time.Now()), logr.Discard())
	srv := httptest.NewServer(guard.Wrap(http.NotFoundHandler()))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/metrics", "some-token"); code != http.StatusInternalServerError || !strings.Contains(body, "cannot authenticate") {
		t.Errorf("API server unreachable: %d %q, want 500 cannot authenticate", code, body)
	}
}
