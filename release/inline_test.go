//go:build amd64 && !race

package release

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
)

// TestStoreInlines: Store compiles into its callers as one store, with no
// call left in it. As an assembly function, the call and its register
// spills cost a windowed receiver 8 % of its rate (it runs five or so per
// message); a Store that calls anything again would lose that without any
// other test noticing. The inliner charges a call it cannot inline 57
// (inlineExtraCallCost in cmd/compile), so a cost below that is a body
// without one.
func TestStoreInlines(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-gcflags=-m=2", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m=2: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`can inline Store with cost (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the compiler does not inline Store:\n%s", out)
	}
	if cost, _ := strconv.Atoi(string(m[1])); cost >= 57 {
		t.Fatalf("Store inlines with cost %d: its body calls a function that does not inline\n%s", cost, out)
	}
}
