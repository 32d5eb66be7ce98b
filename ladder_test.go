package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every test that calls rung.SoakTest is skipped outside the soak rung,
// which selects its tests by name (the SOAK_TESTS of hack/test-rung.sh): one missing
// from that list would run in no rung of make test. TestChaos and
// TestShardedChaos are in the list without calling it (the e2e rung runs
// them too, shorter).
func TestSoakTestsAreListed(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("hack", "test-rung.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^SOAK_TESTS='(.*)'$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("hack/test-rung.sh sets no SOAK_TESTS")
	}
	soak, err := regexp.Compile(string(m[1]))
	if err != nil {
		t.Fatalf("SOAK_TESTS: %v", err)
	}
	marked := regexp.MustCompile(`func (Test\w+)\(t \*testing\.T\) \{\n(?:\t[^\n]*\n){0,3}?\trung\.SoakTest\(t\)`)
	var found []string
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "bin/") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, sm := range marked.FindAllSubmatch(src, -1) {
			found = append(found, string(sm[1]))
			if !soak.MatchString(string(sm[1])) {
				t.Errorf("%s: %s calls rung.SoakTest but SOAK_TESTS (%s) does not name it", path, sm[1], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// make test's e2e rung skips the chaos runs, leaving them to the
	// soak rung.
	for _, chaos := range []string{"TestChaos", "TestShardedChaos"} {
		if !soak.MatchString(chaos) {
			t.Errorf("SOAK_TESTS (%s) does not name %s, which make test runs only in the soak rung", m[1], chaos)
		}
	}
	if len(found) < 2 {
		t.Errorf("found %d soak tests (%v); want the two cost budgets at least: has the way they are marked changed?", len(found), found)
	}
}
