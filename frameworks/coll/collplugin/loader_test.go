package collplugin_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// What the loader skips before running anything, and a plugin that hangs
// at start-up, beside a good plugin: each is skipped with the reason
// (reported by the Base that reports, and in the catalogue's list), the
// good one is registered, and the hung one is given up on within the
// mca_base_plugin_timeout the instance sets, its process gone. Files whose
// names do not start with gompi- are not plugins and pass silently.
func TestLoaderSkipsWhatItCannotRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "gompi-coll-good")
	testutil.Install(t, "./internal/testplugin", good)
	prog, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	install := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, prog, 0o700); err != nil {
			t.Fatal(err)
		}
		return path
	}
	hang := install("gompi-coll-hangstart")
	reasons := map[string]string{
		hang: "it did not start within 2s (mca_base_plugin_timeout)",
		// Names not of the form gompi-<framework>-<component>.
		install("gompi-coll-Upper"):    "its name is not gompi-<framework>-<component>",
		install("gompi-coll-two-more"): "its name is not gompi-<framework>-<component>",
		install("gompi-coll-"):         "its name is not gompi-<framework>-<component>",
		install("gompi-coll"):          "its name is not gompi-<framework>-<component>",
		// Not regular files: a directory, a named pipe (opening it to
		// run would block) and a link to a directory.
		filepath.Join(dir, "gompi-coll-adir"):  "not a regular file (d",
		filepath.Join(dir, "gompi-coll-afifo"): "not a regular file (p",
		filepath.Join(dir, "gompi-coll-alink"): "not a regular file (d",
	}
	if err := os.Mkdir(filepath.Join(dir, "gompi-coll-adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "gompi-coll-afifo"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "gompi-coll-alink")); err != nil {
		t.Fatal(err)
	}
	install("README") // not a plugin's name: not looked at

	const timeout = 2 * time.Second
	cat := mca.NewCatalog()
	cat.RegisterFramework(coll.Framework)
	var out bytes.Buffer
	start := time.Now()
	_, err = mca.NewBase(mca.Options{Catalog: cat, Output: &out, Rank: 0, Reporter: true, Sources: params.Sources{
		CommandLine: []params.Setting{{Name: mca.ComponentPathName, Value: dir}, {Name: mca.PluginTimeoutName, Value: "2"}},
		Env:         []string{"OMPI_MCA_mca_base_param_files=none"}}})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("NewBase: %v\n%s", err, &out)
	}
	// The plugins are described in parallel: the hung one holds the load
	// for the timeout, and then not much longer.
	if took < timeout || took > 3*timeout {
		t.Errorf("loading took %v, want the %v timeout and not three times it", took, timeout)
	}
	skipped := map[string]string{}
	for _, s := range cat.Skipped() {
		skipped[s.Path] = s.Reason
	}
	for path, reason := range reasons {
		if !strings.Contains(skipped[path], reason) {
			t.Errorf("%s: skipped with %q, want %q", path, skipped[path], reason)
		}
		if line := "plugin " + path + " skipped: " + reason; !strings.Contains(out.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, &out)
		}
	}
	if len(skipped) != len(reasons) {
		t.Errorf("skipped %d files, want %d: %v", len(skipped), len(reasons), cat.Skipped())
	}
	es := cat.Components("coll")
	if len(es) != 1 || es[0].Info.Name != "good" || es[0].Path != good {
		t.Errorf("coll components %v, want the good plugin alone", es)
	}
	pids, err := pluginProcesses(hang)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 0 {
		t.Errorf("the plugin that hung at start-up still runs: %v", pids)
	}
}

// lockedBuffer is a log's output, written from go-plugin's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Plugins whose stderr crashed the host (go-plugin parsed it as hclog JSON
// and panicked on a @message that is not a string): hostile writes such
// lines, invalid UTF-8, a 200 kB line and a line cut before its newline
// before its handshake and in every query, through the pipe and through
// the gRPC stream, and is used (its barrier runs on 3 ranks); hostilequery writes them and crashes in a
// query, and declines with the reason quoting its panic. What both wrote
// reaches the log, their hclog lines as warnings, the rest at debug.
func TestHostileStderr(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "gompi-coll-hostile")
	testutil.Install(t, "./internal/testplugin", exe)
	prog, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(dir, "gompi-coll-hostilequery")
	if err := os.WriteFile(crash, prog, 0o700); err != nil {
		t.Fatal(err)
	}
	cat := mca.NewCatalog()
	cat.RegisterFramework(coll.Framework)
	var out lockedBuffer
	b, err := mca.NewBase(mca.Options{Catalog: cat, Output: &out, Rank: 0, Reporter: true, Sources: params.Sources{
		CommandLine: []params.Setting{{Name: mca.ComponentPathName, Value: dir}, {Name: "mca_base_verbose", Value: "100"}},
		Env:         []string{"OMPI_MCA_mca_base_param_files=none"}}})
	if err != nil {
		t.Fatalf("NewBase: %v", err)
	}
	if s := cat.Skipped(); len(s) > 0 {
		t.Fatalf("skipped: %v", s)
	}
	type lifecycle interface {
		coll.Component
		Open(*mca.Base) error
		Close(*mca.Base) error
	}
	comps := map[string]lifecycle{}
	for _, e := range cat.Components("coll") {
		c := e.Component.(lifecycle)
		if err := c.Open(b); err != nil {
			t.Fatalf("%s: Open: %v", e.Info.Name, err)
		}
		defer c.Close(b)
		comps[e.Info.Name] = c
	}
	if comps["hostile"] == nil || comps["hostilequery"] == nil {
		t.Fatalf("components %v, want hostile and hostilequery", cat.Components("coll"))
	}
	const n = 3
	w := colltest.NewWorld(n, false)
	if err := w.Run(func(c coll.Comm) error {
		_, m, err := comps["hostile"].Query(b, c)
		if err != nil {
			return err
		}
		return m.Func(coll.Barrier)(c, &coll.Args{Op: coll.Barrier})
	}); err != nil {
		t.Fatalf("the hostile plugin's barrier: %v", err)
	}
	if got := w.Rounds(); got != coll.CeilLog2(n) {
		t.Errorf("the barrier took %d rounds, want the plugin's %d", got, coll.CeilLog2(n))
	}
	_, _, err = comps["hostilequery"].Query(b, w.Comm(0))
	const reason = "it exited during Query; its stderr: panic: testplugin: crashing after hostile stderr on purpose"
	if !errors.Is(err, mca.ErrDeclined) || !strings.Contains(err.Error(), reason) {
		t.Errorf("the plugin that crashed: %v, want a decline saying %q", err, reason)
	}
	log := out.String()
	// A query's last line is finished by the next query's first, in the
	// pipe and in the stream: 2 of each after 3 queries.
	joined := `[DEBUG] mca.plugin.gompi-coll-hostile: no newline yet, {"@message":1}: rank=0`
	if k := strings.Count(log, joined); k != 4 {
		t.Errorf("the log has %q %d times, want 4", joined, k)
	}
	for _, want := range []string{
		`[WARN]  mca.plugin.gompi-coll-hostile: hostile stderr: rank=0 when="before the handshake"`,
		`[WARN]  mca.plugin.gompi-coll-hostile: hostile stderr: rank=0 when="during a query, through the pipe"`,
		`[WARN]  mca.plugin.gompi-coll-hostile: hostile stderr: rank=0 when="during a query, through the stream"`,
		`[WARN]  mca.plugin.gompi-coll-hostilequery: hostile stderr: rank=0 when="before a crash"`,
		`[DEBUG] mca.plugin.gompi-coll-hostile: {"@message":1}: rank=0`,
		`[DEBUG] mca.plugin.gompi-coll-hostilequery: {"@level":2,"@message":"x"}: rank=0`,
		"[DEBUG] mca.plugin.gompi-coll-hostile: bad \uFFFD utf8: rank=0",
		"[DEBUG] mca.plugin.gompi-coll-hostilequery: panic: testplugin: crashing after hostile stderr on purpose: rank=0",
		reason,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}
