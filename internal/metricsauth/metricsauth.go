// Package metricsauth lets through to a handler (/metrics) only the
// requests whose bearer token the API server authenticates (a TokenReview)
// and authorizes for the request's verb and path (a SubjectAccessReview on
// a non-resource URL), as kube-rbac-proxy and controller-runtime's
// metrics filters do, without the dependencies of k8s.io/apiserver.
//
// Answers: 401 without a bearer token or with one the API server does not
// authenticate, 403 when the user may not, 500 when a review could not be
// made (the API server was unreachable); the handler's answer otherwise.
// Reviews are cached by token (authenticated for a minute, refused for ten
// seconds) and by user, verb and path (allowed for five minutes, denied for
// thirty seconds), so a scraper costs the API server about one request a
// minute.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ErrReview is wrapped by the errors of reviews the API server did not
// answer.
var ErrReview = errors.New("metricsauth: review failed")

// How long reviews are cached, the TTLs of controller-runtime's filter.
const (
	authenticatedFor = time.Minute
	refusedFor       = 10 * time.Second
	allowedFor       = 5 * time.Minute
	deniedFor        = 30 * time.Second
	cacheSize        = 1024
	reviewTimeout    = 10 * time.Second
)

// Guard authenticates and authorizes requests with the API server.
type Guard struct {
	client  kubernetes.Interface
	log     logr.Logger
	users   *cache.LRUExpireCache // token hash -> *authenticationv1.UserInfo, nil if refused
	allowed *cache.LRUExpireCache // user, verb and path -> bool
}

// New returns a Guard that reviews through client; clk times its caches.
func New(client kubernetes.Interface, clk clock.PassiveClock, log logr.Logger) *Guard {
	return &Guard{
		client:  client,
		log:     log,
		users:   cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		allowed: cache.NewLRUExpireCacheWithClock(cacheSize, clk),
	}
}

// FilterProvider is a metricsserver.Options.FilterProvider that guards a
// controller-runtime manager's /metrics with a Guard on the manager's
// config and HTTP client.
func FilterProvider(clk clock.PassiveClock) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("metricsauth: %w", err)
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			return New(client, clk, log).Wrap(h), nil
		}, nil
	}
}

// Wrap returns h behind the guard.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		user, err := g.authenticate(r, token)
		if err != nil {
			g.log.Error(err, "cannot authenticate a metrics request")
			http.Error(w, "cannot authenticate the request", http.StatusInternalServerError)
			return
		}
		if user == nil {
			http.Error(w, "Unauthorized: the API server does not authenticate this token", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		allowed, err := g.authorize(r, user, verb)
		if err != nil {
			g.log.Error(err, "cannot authorize a metrics request", "user", user.Username)
			http.Error(w, "cannot authorize the request", http.StatusInternalServerError)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s", user.Username, verb, r.URL.Path), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authenticate is the user of token, nil if the API server refuses it.
func (g *Guard) authenticate(r *http.Request, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := g.users.Get(key); ok {
		return v.(*authenticationv1.UserInfo), nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	review, err := g.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: TokenReview: %w", ErrReview, err)
	}
	if !review.Status.Authenticated {
		g.users.Add(key, (*authenticationv1.UserInfo)(nil), refusedFor)
		return nil, nil
	}
	user := review.Status.User
	g.users.Add(key, &user, authenticatedFor)
	return &user, nil
}

// authorize says whether user may verb the request's path.
func (g *Guard) authorize(r *http.Request, user *authenticationv1.UserInfo, verb string) (bool, error) {
	groups := slices.Sorted(slices.Values(user.Groups))
	// Everything the review is asked about (fmt prints a map's keys sorted).
	key := fmt.Sprintf("%q %q %q %q %q %q", user.Username, user.UID, groups, user.Extra, verb, r.URL.Path)
	if v, ok := g.allowed.Get(key); ok {
		return v.(bool), nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	review, err := g.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("%w: SubjectAccessReview: %w", ErrReview, err)
	}
	ttl := deniedFor
	if review.Status.Allowed {
		ttl = allowedFor
	}
	g.allowed.Add(key, review.Status.Allowed, ttl)
	return review.Status.Allowed, nil
}
