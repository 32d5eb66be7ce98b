package e2e

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The image is built here the way the Dockerfile builds it (no container
// engine on the test machines): every directory the binary's packages live
// in is copied into the build stage, the build flags give a static binary,
// and the final stage runs it as a non-root user.
func TestDockerfileBuildsAStaticNonRootBinary(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(raw)

	// Every package of this module that the binary imports is copied.
	copied := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^COPY (\S+?)/? `).FindAllStringSubmatch(dockerfile, -1) {
		copied[m[1]] = true
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", ".")
	list.Dir = repoRoot
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(repoRoot, dir)
		if err != nil {
			t.Fatal(err)
		}
		top := strings.Split(rel, string(filepath.Separator))[0]
		if top == "." {
			top = "main.go"
		}
		if !copied[top] {
			t.Errorf("the binary needs %s, which the Dockerfile does not COPY", rel)
		}
	}

	// And the files the main package embeds (the chart's Chart.yaml, for
	// the version).
	embeds := exec.Command("go", "list", "-f", `{{join .EmbedFiles "\n"}}`, ".")
	embeds.Dir = repoRoot
	if out, err = embeds.Output(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if !copied[f] && !copied[strings.Split(f, "/")[0]] {
			t.Errorf("the binary embeds %s, which the Dockerfile does not COPY", f)
		}
	}

	// The build stage's command, run here as written (with the output
	// moved), gives a static binary.
	run := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 (?:.*\\\n)*.*go build .*)$`).FindStringSubmatch(dockerfile)
	if run == nil {
		t.Fatal("no `RUN CGO_ENABLED=0 ... go build ...` in the Dockerfile")
	}
	bin := filepath.Join(t.TempDir(), "redislock")
	script := strings.ReplaceAll(strings.ReplaceAll(run[1], "\\\n", " "), "/out/redislock", bin)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v)", p.Type)
		}
	}

	// The final stage is distroless or scratch, and not root.
	stages := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(dockerfile, -1)
	final := stages[len(stages)-1][1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %s: want distroless/static or scratch", final)
	}
	users := regexp.MustCompile(`(?m)^USER (\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(users) == 0 || slices.Contains([]string{"0", "root", "0:0"}, users[len(users)-1][1]) {
		t.Errorf("the image does not end with a non-root USER: %v", users)
	}
}
