package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/internal/agent"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// userDocs are the Markdown files a user or contributor reads; docs/bench
// holds dated measurements, written by make bench.
func userDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "CONTRIBUTING.md"}, pages...)
}

// Every fenced command, manifest or program in the docs is run by a test
// or says it is illustrative, and every flag, annotation, label, values
// key, make target and repository path the docs name exists: flags as the
// binary's own -h lists them, values keys in values.schema.json, make
// targets in the Makefile, paths in the tree.
func TestDocsNameOnlyWhatExists(t *testing.T) {
	c := newClaims(t)
	for _, path := range userDocs(t) {
		d, err := testenv.ReadDoc(".", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range d.Blocks {
			c.block(d.Path, b)
		}
		for _, s := range d.Spans {
			c.span(d.Path, s)
		}
		for _, l := range d.Links {
			c.link(d.Path, l)
		}
	}
	for _, e := range c.errs {
		t.Error(e)
	}
}

// docs/install.md names every value of the chart: each top-level key of
// values.schema.json, and each key below one that is the chart's own (not
// a Kubernetes type passed through), as a code span.
func TestInstallDocNamesEveryValue(t *testing.T) {
	c := newClaims(t)
	d, err := testenv.ReadDoc(".", "docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	var spans strings.Builder
	for _, s := range d.Spans {
		spans.WriteString(" " + s.Text + " ")
	}
	named := spans.String()
	props, _ := c.schema["properties"].(map[string]any)
	for top, v := range props {
		if top == "global" { // Helm's, for a chart that is a dependency
			continue
		}
		keys := []string{top}
		if sub, _ := v.(map[string]any)["properties"].(map[string]any); sub != nil && !slices.Contains(passedThrough, top) {
			keys = keys[:0]
			for k := range sub {
				keys = append(keys, top+"."+k)
			}
		}
		for _, k := range keys {
			if !regexp.MustCompile(`[ ]` + regexp.QuoteMeta(k) + `[ .=]`).MatchString(named) {
				t.Errorf("docs/install.md does not name the value %s", k)
			}
		}
	}
}

// passedThrough are values that are Kubernetes types the chart passes on,
// documented as a whole.
var passedThrough = []string{"podSecurityContext", "securityContext", "podLabels", "resources", "strategy", "livenessProbe", "readinessProbe"}

// claims holds what exists, and the claims found not to.
type claims struct {
	t       *testing.T
	flags   map[string][]string // command -> its flags, without dashes
	targets map[string]bool
	schema  map[string]any
	// crds are the openAPIV3Schemas of the CRDs, where spec.x and
	// status.x must be.
	crds []map[string]any
	// source is the text of the product's sources and manifests, where an
	// annotation or label must appear.
	source string
	// tests is the text of every _test.go file, where a block's id must.
	tests string
	errs  []string
}

func newClaims(t *testing.T) *claims {
	c := &claims{t: t, flags: map[string][]string{}, targets: map[string]bool{}}
	bin := filepath.Join(t.TempDir(), "redislock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, cmd := range []string{"controller", "agent", "webhook-wait", "tenant-acl"} {
		out, _ := exec.Command(bin, cmd, "-h").CombinedOutput()
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			c.flags[cmd] = append(c.flags[cmd], m[1])
		}
		if len(c.flags[cmd]) == 0 {
			t.Fatalf("redislock %s -h listed no flags:\n%s", cmd, out)
		}
	}
	out, _ := exec.Command("go", "run", "./hack/demo", "-h").CombinedOutput()
	for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
		c.flags["hack/demo"] = append(c.flags["hack/demo"], m[1])
	}
	if len(c.flags["hack/demo"]) == 0 {
		t.Fatalf("go run ./hack/demo -h listed no flags:\n%s", out)
	}
	// The example operators' flags, as their cmd/main.go declare them.
	for ex, want := range map[string]string{"examples/operator": "leader-elect", "examples/sharded-operator": "sharding-redislock"} {
		opMain, err := os.ReadFile(ex + "/cmd/main.go")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`flag\.[A-Za-z]+Var\(&\w+, "([a-z0-9-]+)"`).FindAllStringSubmatch(string(opMain), -1) {
			c.flags[ex] = append(c.flags[ex], m[1])
		}
		if !slices.Contains(c.flags[ex], want) {
			t.Fatalf("%s/cmd/main.go: no flag %q found", ex, want)
		}
	}
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		c.targets[m[1]] = true
	}
	raw, err := os.ReadFile("charts/redislock/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &c.schema); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, f := range files {
		var crd apiextensionsv1.CustomResourceDefinition
		if b, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		} else if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			var m map[string]any
			b, _ := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			c.crds = append(c.crds, m)
		}
	}
	var src, tests strings.Builder
	err = filepath.WalkDir(".", func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (p == "bin" || p == "dist" || strings.HasPrefix(e.Name(), ".")) && p != "." {
			return filepath.SkipDir
		}
		ext := filepath.Ext(p)
		if e.IsDir() || (ext != ".go" && ext != ".yaml" && ext != ".tpl" && ext != ".txt") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, "_test.go") {
			tests.Write(b)
		} else {
			src.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.source, c.tests = src.String(), tests.String()
	return c
}

func (c *claims) errorf(path string, line int, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("%s:%d: ", path, line)+fmt.Sprintf(format, args...))
}

// checkedLangs are the fenced blocks that are commands, manifests or
// programs: each must be run by a test or say it is illustrative.
var (
	checkedLangs = map[string]bool{"sh": true, "console": true, "shell": true, "bash": true, "yaml": true, "go": true}
	shells       = map[string]bool{"sh": true, "console": true, "shell": true, "bash": true}
)

func (c *claims) block(path string, b testenv.DocBlock) {
	if !checkedLangs[b.Lang] && !strings.HasPrefix(b.Marker, "file=") && !strings.HasPrefix(b.Marker, "excerpt=") {
		return
	}
	switch {
	case b.Marker == "illustrative":
	case strings.HasPrefix(b.Marker, "excerpt="):
		src, err := os.ReadFile(strings.TrimPrefix(b.Marker, "excerpt="))
		if err != nil {
			c.errorf(path, b.Line, "block marked %s: %v", b.Marker, err)
		} else if !isExcerpt(string(src), b.Text) {
			c.errorf(path, b.Line, "block marked %s is not a run of that file's lines (indentation aside)", b.Marker)
		}
		if !shells[b.Lang] {
			c.words(path, b.Line, b.Text)
		}
		return
	case strings.HasPrefix(b.Marker, "file="):
		want, err := os.ReadFile(b.File())
		if err != nil {
			c.errorf(path, b.Line, "block marked %s: %v", b.Marker, err)
		} else if strings.TrimRight(string(want), "\n") != strings.TrimRight(b.Text, "\n") {
			c.errorf(path, b.Line, "block marked %s is not that file's content", b.Marker)
		}
	case b.ID() != "":
		if !regexp.MustCompile(`(DocBlockByID|docCommand)\([^)]*"` + regexp.QuoteMeta(b.ID()) + `"`).MatchString(c.tests) {
			c.errorf(path, b.Line, "block marked %s: no test reads it (testenv.DocBlockByID, or test/cluster's docCommand)", b.Marker)
		}
	default:
		c.errorf(path, b.Line, "```%s block with marker %q: mark it illustrative, file=<path> or id=<name> (a test runs it)", b.Lang, b.Marker)
	}
	if !shells[b.Lang] {
		c.words(path, b.Line, b.Text)
		return
	}
	cmds, err := testenv.Commands(b.Text)
	if err != nil {
		// A transcript (console) may hold output that is no shell.
		if b.Lang != "console" {
			c.errorf(path, b.Line, "not a shell block: %v", err)
		}
		c.words(path, b.Line, b.Text)
		return
	}
	for _, words := range cmds {
		c.command(path, b.Line, words)
	}
	c.words(path, b.Line, b.Text)
}

// isExcerpt reports whether text's lines are a run of src's lines, each
// compared without its leading and trailing white space.
func isExcerpt(src, text string) bool {
	trim := func(s string) []string {
		var out []string
		for line := range strings.Lines(strings.TrimRight(s, "\n")) {
			out = append(out, strings.TrimSpace(line))
		}
		return out
	}
	lines, want := trim(src), trim(text)
	for i := 0; i+len(want) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// command checks a command's make target, redislock flags and helm values.
func (c *claims) command(path string, line int, w []string) {
	switch {
	case w[0] == "make":
		for _, a := range w[1:] {
			if !strings.Contains(a, "=") && !strings.HasPrefix(a, "-") && !c.targets[a] {
				c.errorf(path, line, "make %s: the Makefile has no target %s", a, a)
			}
		}
	case w[0] == "redislock" || strings.HasSuffix(w[0], "/redislock"):
		if len(w) < 2 {
			return
		}
		flags, ok := c.flags[w[1]]
		if !ok {
			if !slices.Contains(flaglessCommands, w[1]) {
				c.errorf(path, line, "redislock %s: no such command", w[1])
			}
			return
		}
		for _, a := range w[2:] {
			if a == "--" {
				break
			}
			if a == "-h" || a == "--help" {
				continue
			}
			if name, isFlag := flagName(a); isFlag && !slices.Contains(flags, name) {
				c.errorf(path, line, "redislock %s: no flag -%s", w[1], name)
			}
		}
	case w[0] == "helm":
		for i, a := range w {
			if a == "--set" && i+1 < len(w) {
				for _, kv := range strings.Split(w[i+1], ",") {
					k, _, _ := strings.Cut(kv, "=")
					c.valuesKey(path, line, k, true)
				}
			}
		}
	}
}

// externalFlags are the flags of other tools that the docs name alone:
// Go's, helm's and kubectl's.
var externalFlags = []string{"race", "buildvcs", "count", "run", "wait", "force-conflicts", "server-side", "create-namespace", "dry-run", "set", "values", "take-ownership"}

// anyFlag says whether name is a flag of a redislock command, of hack/demo,
// the example operators, or one of externalFlags.
func (c *claims) anyFlag(name string) bool {
	for _, fs := range c.flags {
		if slices.Contains(fs, name) {
			return true
		}
	}
	return slices.Contains(externalFlags, name)
}

// flaglessCommands are the redislock commands without flags: those for
// users, and those the agent and the webhook's init container run.
var flaglessCommands = []string{"version", "help", "-h", "--help", agent.InstallCommand, agent.GuardCommand}

// flagName says whether a is a flag (-x, --x, -x=v) and returns its name.
func flagName(a string) (string, bool) {
	if !strings.HasPrefix(a, "-") || a == "-" || strings.HasPrefix(a, "---") {
		return "", false
	}
	name := strings.TrimLeft(a, "-")
	name, _, _ = strings.Cut(name, "=")
	return name, name != ""
}

var (
	annotation = regexp.MustCompile(`redislock\.io/[a-z0-9][a-z0-9-]*`)
	// repoPath is a path into one of the repository's top directories.
	repoPath = regexp.MustCompile(`^(?:\./)?(?:api|charts|config|docs|examples|hack|internal|pkg|test)/[A-Za-z0-9_./-]*$`)
	dotted   = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)+$`)
	field    = regexp.MustCompile(`^(?:spec|status)(?:\.[A-Za-z0-9]+(?:\[[0-9]+\])?)+$`)
	flagSpan = regexp.MustCompile(`^--?[a-z][a-z0-9-]*(?:=\S*)?$`)
	// goName is a Go qualified name, as redis.UniversalClient.
	goName = regexp.MustCompile(`\.[A-Z]`)
)

// words checks the annotations and labels a text names.
func (c *claims) words(path string, line int, text string) {
	for _, a := range annotation.FindAllString(text, -1) {
		if !strings.Contains(c.source, a) {
			c.errorf(path, line, "%s: no source or manifest names it", a)
		}
	}
}

func (c *claims) span(path string, s testenv.DocText) {
	text := strings.TrimSpace(s.Text)
	c.words(path, s.Line, text)
	if cmds, err := testenv.Commands(text); err == nil {
		for _, w := range cmds {
			c.command(path, s.Line, w)
		}
	}
	switch {
	case flagSpan.MatchString(text):
		if name, _ := flagName(text); !c.anyFlag(name) {
			c.errorf(path, s.Line, "%s: no redislock command, hack/demo, example operator or tool named in externalFlags has this flag", text)
		}
	case repoPath.MatchString(text):
		c.path(path, s.Line, text)
	case field.MatchString(text):
		c.field(path, s.Line, text)
	case dotted.MatchString(text) && !goName.MatchString(text):
		c.valuesKey(path, s.Line, text, false)
	}
}

func (c *claims) link(path string, l testenv.DocText) {
	dest, _, _ := strings.Cut(l.Text, "#")
	if dest == "" || strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
		return
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), dest)); err != nil {
		c.errorf(path, l.Line, "link to %s: %v", l.Text, err)
	}
}

// path checks a repository path; one with a placeholder or a glob is not
// checked.
func (c *claims) path(doc string, line int, p string) {
	if strings.ContainsAny(p, "<>*") || strings.Contains(p, "...") {
		return
	}
	p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".")
	if _, err := os.Stat(p); err != nil {
		c.errorf(doc, line, "path %s does not exist", p)
	}
}

// field checks a dotted field of a resource (spec.redis.db) against the
// CRDs: one of them must have it.
func (c *claims) field(doc string, line int, key string) {
	for _, s := range c.crds {
		if schemaHas(s, strings.Split(key, ".")) {
			return
		}
	}
	c.errorf(doc, line, "field %s: no RedisLock, RedisConnection or ClusterRedisConnection has it", key)
}

// schemaHas says whether an OpenAPI schema has the property path parts,
// or a free-form map on the way.
func schemaHas(node map[string]any, parts []string) bool {
	for _, p := range parts {
		p, _, _ = strings.Cut(p, "[")
		if items, ok := node["items"].(map[string]any); ok {
			node = items
		}
		props, _ := node["properties"].(map[string]any)
		if props == nil {
			return node["additionalProperties"] != nil || node["x-kubernetes-preserve-unknown-fields"] == true
		}
		next, ok := props[p].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// valuesKey checks a dotted Helm values key (a.b.c) against the chart's
// schema. A span that is not one (its first part no top-level key) is
// checked only when it comes from --set (must).
func (c *claims) valuesKey(doc string, line int, key string, must bool) {
	parts := strings.Split(strings.TrimSuffix(key, "[0]"), ".")
	node := c.schema
	for i, p := range parts {
		p, _, _ = strings.Cut(p, "[")
		props, _ := node["properties"].(map[string]any)
		if props == nil {
			return // a free-form map: any key below it
		}
		next, ok := props[p].(map[string]any)
		if !ok {
			if i > 0 || must {
				c.errorf(doc, line, "values key %s: the chart's values.schema.json has no %s", key, strings.Join(parts[:i+1], "."))
			}
			return
		}
		node = next
	}
}

// The Kubernetes floor the docs state ("Kubernetes 1.NN or later") is the
// chart's kubeVersion, and no older than the newest API the manifests need
// (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: 1.30).
func TestKubernetesFloorIsTheChartsKubeVersion(t *testing.T) {
	chart, err := os.ReadFile("charts/redislock/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^>=1\.(\d+)\.0-0$`).FindStringSubmatch(c.KubeVersion)
	if m == nil {
		t.Fatalf("charts/redislock kubeVersion %q; want >=1.NN.0-0", c.KubeVersion)
	}
	floor := "1." + m[1]
	if minor, _ := strconv.Atoi(m[1]); minor < 30 {
		t.Errorf("the chart's floor %s is older than 1.30, which ValidatingAdmissionPolicy v1 needs", floor)
	}
	said := regexp.MustCompile(`Kubernetes (1\.\d+) or later`)
	found := 0
	for _, path := range userDocs(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range said.FindAllStringSubmatch(string(b), -1) {
			found++
			if s[1] != floor {
				t.Errorf("%s says Kubernetes %s or later; the chart's kubeVersion is %s", path, s[1], c.KubeVersion)
			}
		}
	}
	if found == 0 {
		t.Error("no doc states the Kubernetes floor")
	}
}

// Every /leader answer the docs show parses as the agent's own
// (leaderhttp.Status, no field it lacks; "..." stands for a time), with a
// lock named as the controller names locks in Redis: the cluster's
// identity, the namespace and the name, or global/<lockName>.
func TestLeaderExamplesParseAsTheAgentsAnswer(t *testing.T) {
	lockName := regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[a-z0-9-]+/[a-z0-9.-]+|global/[a-z0-9.-]+)$`)
	found := 0
	for _, path := range userDocs(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Each answer is the JSON value that starts at {"leading":, read
		// whole (a sharded lock's has objects inside).
		text := strings.ReplaceAll(string(b), `"..."`, `"2026-01-01T00:00:00Z"`)
		for i := strings.Index(text, `{"leading":`); i >= 0; i = nextAnswer(text, i) {
			found++
			dec := json.NewDecoder(strings.NewReader(text[i:]))
			dec.DisallowUnknownFields()
			var st leaderhttp.Status
			if err := dec.Decode(&st); err != nil {
				t.Errorf("%s: %.120s is not a /leader answer: %v", path, text[i:], err)
				continue
			}
			if !lockName.MatchString(st.Lock) {
				t.Errorf("%s: %s...: lock %q is not a lock's name in Redis (<cluster id>/<namespace>/<name> or global/<lockName>)", path, text[i:i+40], st.Lock)
			}
		}
	}
	if found == 0 {
		t.Error("no /leader answer in the docs")
	}
}

// nextAnswer is the index of the next {"leading": in text after the one
// at i, or -1.
func nextAnswer(text string, i int) int {
	j := strings.Index(text[i+1:], `{"leading":`)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// Every permission table in the user docs, marked by a line
// "<!-- rbac: PATH -->" before it, grants exactly what the generated RBAC
// at PATH does: one row per rule (role kind, API group, resources, names,
// verbs), "core" for the "" group.
func TestPermissionTablesAreTheGeneratedRBAC(t *testing.T) {
	marker := regexp.MustCompile(`^<!-- rbac: (\S+) -->$`)
	found := 0
	for _, doc := range userDocs(t) {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for i, line := range lines {
			m := marker.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			found++
			var table []string
			for _, row := range lines[i+3:] { // past the header and its rule
				if !strings.HasPrefix(row, "|") {
					break
				}
				cells := strings.Split(strings.Trim(row, "|"), "|")
				if len(cells) < 5 {
					t.Errorf("%s:%d: a row of %d cells: %q", doc, i+1, len(cells), row)
					continue
				}
				for j := range cells {
					cells[j] = strings.TrimSpace(cells[j])
				}
				table = append(table, grants(cells[0], cells[1], strings.Split(cells[2], ", "), cells[3], strings.Split(cells[4], ", "))...)
			}
			slices.Sort(table)
			if want := rbacGrants(t, m[1]); !slices.Equal(table, want) {
				t.Errorf("%s:%d: the table under <!-- rbac: %s --> grants\n  %s\n%s grants\n  %s", doc, i+1, m[1], strings.Join(table, "\n  "), m[1], strings.Join(want, "\n  "))
			}
		}
	}
	if found < 2 {
		t.Fatalf("%d marked permission tables in the user docs; want the controller's and the agent's", found)
	}
}

// grants lays out one rule as "kind group resource names verb" strings.
func grants(kind, group string, resources []string, names string, verbs []string) []string {
	if group == "" {
		group = "core"
	}
	var out []string
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, strings.Join([]string{kind, group, r, names, v}, " "))
		}
	}
	return out
}

// rbacGrants reads the ClusterRoles and Roles of the YAML file at path as
// grants, sorted.
func rbacGrants(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, doc := range strings.Split(string(src), "\n---") {
		var role struct {
			Kind  string `json:"kind"`
			Rules []struct {
				APIGroups     []string `json:"apiGroups"`
				Resources     []string `json:"resources"`
				ResourceNames []string `json:"resourceNames"`
				Verbs         []string `json:"verbs"`
			} `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				out = append(out, grants(role.Kind, g, r.Resources, strings.Join(r.ResourceNames, ", "), r.Verbs)...)
			}
		}
	}
	slices.Sort(out)
	return out
}
