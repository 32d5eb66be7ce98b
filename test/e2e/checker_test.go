package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/leaderhttp"
)

// The checker: it samples every candidate's GET /leader (the agent's, and
// the sample operator's with -http-address) from outside the candidates,
// and rebuilds their terms from the answers' observedAt (one host's clock)
// and fencing tokens.

// sample is one /leader answer; code 0 means no answer (refused, timed out).
type sample struct {
	id   string
	sent time.Time
	code int
	st   leaderhttp.Status
}

// candidates are what a poller samples: each candidate's GET /leader
// address (host:port), which stays the same across its restarts.
type candidates interface {
	addrs() map[string]string
}

// poller samples every candidate's /leader every 5ms, each on its own
// goroutine, so a stopped candidate does not delay the others.
type poller struct {
	mu      sync.Mutex
	samples []sample
	last    map[string]sample
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startPoller(cs candidates) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{last: map[string]sample{}, cancel: cancel}
	for id, addr := range cs.addrs() {
		url := "http://" + addr + "/leader"
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				p.add(p.poll(ctx, id, url))
			}
		}()
	}
	return p
}

// poll asks url once, within 200ms; an error is a sample with code 0.
func (p *poller) poll(ctx context.Context, id, url string) sample {
	s := sample{id: id, sent: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if st, code, err := leaderhttp.Get(ctx, url); err == nil {
		s.st, s.code = st, code
	}
	return s
}

func (p *poller) add(s sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s)
	if s.code != 0 {
		p.last[s.id] = s
	}
}

func (p *poller) stop() {
	p.cancel()
	p.wg.Wait()
}

// lastAnswers describes each candidate's latest answer, for a failure
// message: its code, age and body (the agent's error says why it cannot
// campaign).
func (p *poller) lastAnswers() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := slices.Sorted(maps.Keys(p.last))
	var b strings.Builder
	for _, id := range ids {
		s := p.last[id]
		fmt.Fprintf(&b, "  %s: %d, %v ago: %+v\n", id, s.code, time.Since(s.sent).Round(time.Millisecond), s.st)
	}
	if len(ids) == 0 {
		b.WriteString("  (no candidate has answered)\n")
	}
	return b.String()
}

// leaders returns the agents whose latest answer, within the last 500ms,
// is 200.
func (p *poller) leaders() []string {
	var ids []string
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.last {
		if time.Since(s.sent) > 500*time.Millisecond {
			continue // not answering: stopped or dead
		}
		if s.code == http.StatusOK {
			ids = append(ids, id)
		}
	}
	return ids
}

// waitLeader waits until exactly one answering agent, not not, answers
// 200, and returns it.
func (p *poller) waitLeader(t *testing.T, not string, within time.Duration) string {
	t.Helper()
	var leader string
	waitUntil(t, within, "one leader other than "+not, func() bool {
		ids := p.leaders()
		if len(ids) == 1 && ids[0] != not {
			leader = ids[0]
			return true
		}
		return false
	})
	return leader
}

// waitAnswer waits for the first answer of id to a request sent after
// since.
func (p *poller) waitAnswer(t *testing.T, id string, since time.Time, within time.Duration) sample {
	t.Helper()
	var got sample
	waitUntil(t, within, "an answer from "+id, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, s := range p.samples {
			if s.id == id && s.code != 0 && s.st.ObservedAt.After(since) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// waitNotLeading waits for an answer of id, observed after since, that it
// does not lead, and returns the instant it was observed.
func (p *poller) waitNotLeading(t *testing.T, id string, since time.Time, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	waitUntil(t, within, id+" answering 503", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, s := range p.samples {
			if s.id == id && s.code == http.StatusServiceUnavailable && s.st.ObservedAt.After(since) {
				at = s.st.ObservedAt
				return true
			}
		}
		return false
	})
	return at
}

// firstLead is when id first answered 200 for an instant after since.
func (p *poller) firstLead(id string, since time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.samples {
		if s.id == id && s.code == http.StatusOK && s.st.ObservedAt.After(since) {
			return s.st.ObservedAt
		}
	}
	return time.Time{}
}

// lastLead is the latest instant id answered 200 for.
func (p *poller) lastLead(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, s := range p.samples {
		if s.id == id && s.code == http.StatusOK && s.st.ObservedAt.After(last) {
			last = s.st.ObservedAt
		}
	}
	return last
}

// steady checks that for d from now, every answer of every agent agrees
// on one leader: exactly one agent answers 200, the others 503.
func (p *poller) steady(t *testing.T, d time.Duration) {
	t.Helper()
	from := time.Now()
	waitUntil(t, d+time.Second, "a steady window", func() bool { return time.Since(from) >= d })
	p.mu.Lock()
	defer p.mu.Unlock()
	codes := map[string]map[int]int{}
	for _, s := range p.samples {
		if s.sent.Before(from) || s.code == 0 {
			continue
		}
		if codes[s.id] == nil {
			codes[s.id] = map[int]int{}
		}
		codes[s.id][s.code]++
	}
	var leaders []string
	for id, c := range codes {
		if c[http.StatusOK] > 0 {
			leaders = append(leaders, id)
			if c[http.StatusServiceUnavailable] > 0 {
				t.Errorf("in a steady window %s answered 200 %d times and 503 %d times", id, c[http.StatusOK], c[http.StatusServiceUnavailable])
			}
		}
	}
	if len(leaders) != 1 {
		t.Errorf("in a steady window of %v the agents answering 200 were %v (answers %v), want exactly one", d, leaders, codes)
	}
}

// span is one term as the answers show it: the first and last instants a
// candidate answered 200 with one fencing token, with no other answer of
// its between.
type span struct {
	id          string
	fence       int64
	first, last time.Time
	n           int
}

// terms rebuilds the terms from the answers, and counts the answers and
// the 200s; bad lists 200 answers whose body contradicts itself.
func (p *poller) terms() (spans []span, total, ok int, bad []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	byCandidate := map[string][]sample{}
	for _, s := range p.samples {
		if s.code == 0 {
			continue
		}
		total++
		if s.code == http.StatusOK {
			ok++
			if !s.st.Leading || s.st.Holder != s.id || s.st.FencingToken <= 0 || (s.st.ValidUntil != nil && !s.st.ObservedAt.Before(*s.st.ValidUntil)) {
				bad = append(bad, fmt.Sprintf("200 from %s with an inconsistent body: %+v", s.id, s.st))
			}
		}
		byCandidate[s.id] = append(byCandidate[s.id], s)
	}
	for id, ss := range byCandidate {
		sort.Slice(ss, func(i, j int) bool { return ss[i].st.ObservedAt.Before(ss[j].st.ObservedAt) })
		var cur *span
		for _, s := range ss {
			if s.code != http.StatusOK || (cur != nil && cur.fence != s.st.FencingToken) {
				if cur != nil {
					spans = append(spans, *cur)
					cur = nil
				}
			}
			if s.code == http.StatusOK {
				if cur == nil {
					cur = &span{id: id, fence: s.st.FencingToken, first: s.st.ObservedAt}
				}
				cur.last = s.st.ObservedAt
				cur.n++
			}
		}
		if cur != nil {
			spans = append(spans, *cur)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].first.Before(spans[j].first) })
	return spans, total, ok, bad
}

// overlaps lists the pairs of terms of different candidates whose
// instants overlap: S1 broken. spans are sorted by first.
func overlaps(spans []span) []string {
	var out []string
	for i := range spans {
		for j := i + 1; j < len(spans) && !spans[j].first.After(spans[i].last); j++ {
			if spans[j].id != spans[i].id {
				out = append(out, fmt.Sprintf("%s (fence %d, %s..%s) and %s (fence %d, %s..%s)",
					spans[i].id, spans[i].fence, clock(spans[i].first), clock(spans[i].last),
					spans[j].id, spans[j].fence, clock(spans[j].first), clock(spans[j].last)))
			}
		}
	}
	return out
}

// regressions lists the terms whose fencing token is not above every
// earlier term's: S3 broken. spans are sorted by first.
func regressions(spans []span) []string {
	var out []string
	var top span
	for _, s := range spans {
		// A term of the same token and candidate is one term split by a
		// missed answer, not a regression.
		if top.fence != 0 && (s.fence < top.fence || (s.fence == top.fence && s.id != top.id)) {
			out = append(out, fmt.Sprintf("%s fence %d at %s after %s fence %d", s.id, s.fence, clock(s.first), top.id, top.fence))
		}
		if s.fence > top.fence {
			top = s
		}
	}
	return out
}

// maxGap is the longest time within [from, to) that no term covers.
func maxGap(spans []span, from, to time.Time) time.Duration {
	covered := from
	var gap time.Duration
	for _, s := range spans {
		if !s.last.After(covered) {
			continue
		}
		if s.first.After(to) {
			break
		}
		if s.first.After(covered) {
			gap = max(gap, s.first.Sub(covered))
		}
		covered = s.last
	}
	if to.After(covered) {
		gap = max(gap, to.Sub(covered))
	}
	return gap
}

// checkNoOverlap fails if two candidates answered 200 for overlapping
// terms, and logs the terms.
func (p *poller) checkNoOverlap(t *testing.T) {
	t.Helper()
	spans, total, ok, bad := p.terms()
	for _, b := range bad {
		t.Error(b)
	}
	var terms []string
	for _, s := range spans {
		terms = append(terms, fmt.Sprintf("%s fence %d %s..%s (%d answers)", s.id, s.fence, clock(s.first), clock(s.last), s.n))
	}
	t.Logf("%d answers (%d of them 200) in %d terms:\n  %s", total, ok, len(spans), strings.Join(terms, "\n  "))
	if o := overlaps(spans); len(o) > 0 {
		t.Errorf("S1 broken at the endpoint: %d overlapping terms:\n  %s", len(o), strings.Join(o, "\n  "))
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }

// The checker's verdicts on terms made up to break each rule, so a chaos
// run that finds nothing found nothing because there was nothing.
func TestCheckerFindsOverlapsRegressionsAndGaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	clean := []span{
		{id: "a", fence: 10, first: at(0), last: at(1000)},
		{id: "b", fence: 11, first: at(1500), last: at(3000)},
		{id: "a", fence: 12, first: at(3001), last: at(4000)},
	}
	if o, r := overlaps(clean), regressions(clean); len(o) != 0 || len(r) != 0 {
		t.Errorf("clean terms: overlaps %v, regressions %v", o, r)
	}
	if g := maxGap(clean, at(0), at(5000)); g != 1000*time.Millisecond {
		t.Errorf("max gap %v, want 1s (4s..5s; 1s..1.5s is shorter)", g)
	}
	if g := maxGap(clean, at(1200), at(1400)); g != 200*time.Millisecond {
		t.Errorf("max gap in a window no term covers: %v, want the whole 200ms", g)
	}
	overlapping := []span{
		{id: "a", fence: 10, first: at(0), last: at(1000)},
		{id: "b", fence: 11, first: at(1000), last: at(2000)}, // shares the instant 1s
	}
	if o := overlaps(overlapping); len(o) != 1 {
		t.Errorf("terms sharing an instant: %d overlaps, want 1", len(o))
	}
	regressing := []span{
		{id: "a", fence: 10, first: at(0), last: at(1000)},
		{id: "b", fence: 10, first: at(2000), last: at(3000)},
		{id: "a", fence: 9, first: at(4000), last: at(5000)},
	}
	if r := regressions(regressing); len(r) != 2 {
		t.Errorf("a repeated and a lower token: %d regressions, want 2: %v", len(r), r)
	}
}
