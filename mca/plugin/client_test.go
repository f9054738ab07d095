package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpierr"
)

// installGuest puts the guest SDK's test plugin at dir/gompi-coll-<name>.
func installGuest(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gompi-coll-"+name)
	testutil.Install(t, "./internal/guestplugin", path)
	return path
}

// startGuest installs the guest plugin as gompi-coll-<name> and starts it
// with the given call timeout, logging to the returned buffer; the plugin
// is killed when the test ends, if it still runs.
func startGuest(t *testing.T, name string, timeout time.Duration) (*Process, *syncBuffer) {
	t.Helper()
	path := installGuest(t, name)
	out := new(syncBuffer)
	p, err := start(path, "coll", 1, timeout, testLogger(out))
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	t.Cleanup(p.kill)
	return p, out
}

// The host's client against a plugin built with the guest SDK (go-plugin
// and grpc-go): started, described, opened with a value, queried; a
// plugin's own error leaves it usable; an answer of 5 MB (far past the
// 64 KiB window, so paced by the host's WINDOW_UPDATEs) and a question of
// 1 MiB (paced by the plugin's) arrive whole; and Stop asks it to exit,
// which it does by itself (status 0, not killed), its socket's directory
// removed.
func TestClientRealPlugin(t *testing.T) {
	path := installGuest(t, "guest")
	var out syncBuffer
	d, p, err := describe(path, "coll", "guest", 1, 10*time.Second, testLogger(&out))
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out.String())
	}
	defer p.kill()
	if got := d.String(); got != "coll/guest v1.2.3 (API 1.0.0)" || d.Priority != 42 || len(d.Params) != 1 || d.Params[0].Name != "coll_guest_word" {
		t.Errorf("description %s, priority %d, params %+v", got, d.Priority, d.Params)
	}
	open, _ := json.Marshal(OpenRequest{Params: map[string]string{"coll_guest_word": "bonjour"}})
	if _, err := p.call("Open", open); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if b, err := p.Query([]byte("echo:abc")); err != nil || string(b) != "bonjour:abc" {
		t.Errorf("echo: %q, %v; want the opened value and the question", b, err)
	}
	_, err = p.Query([]byte("fail"))
	if !errors.Is(err, mpierr.ErrComponentNotFound) || !strings.Contains(err.Error(), "Query: asked to fail") || strings.Contains(err.Error(), "stopped it") {
		t.Errorf("a failed query: %v, want the plugin's message, and the plugin kept", err)
	}
	if b, err := p.Query([]byte("echo:again")); err != nil || string(b) != "bonjour:again" {
		t.Errorf("after its own error: %q, %v", b, err)
	}
	const big = 5_000_000
	b, err := p.Query([]byte(fmt.Sprint("size:", big)))
	if err != nil || len(b) != big {
		t.Fatalf("a %d-byte answer: %d bytes, %v", big, len(b), err)
	}
	for i, c := range b {
		if c != byte(i*7+3) {
			t.Fatalf("a %d-byte answer: byte %d is %d, want %d", big, i, c, byte(i*7+3))
		}
	}
	q := []byte("len:" + strings.Repeat("0123456789abcdef", 1<<16))
	var sum uint32
	for _, c := range q {
		sum = sum*31 + uint32(c)
	}
	if b, err := p.Query(q); err != nil || string(b) != fmt.Sprintf("%d:%d", len(q), sum) {
		t.Errorf("a %d-byte question: %q, %v", len(q), b, err)
	}
	// A sweep, however young it takes a dead host's folder to be, leaves
	// the folder of a plugin whose host lives.
	sweepSockDirs(filepath.Dir(p.sock.path), time.Now().Add(time.Hour))
	if _, err := os.Stat(p.sock.path); err != nil {
		t.Errorf("a sweep removed the socket folder of a running plugin: %v", err)
	}
	p.Stop()
	if st := p.state; st == nil || st.ExitCode() != 0 {
		t.Errorf("after Stop: %v, want an exit of its own with status 0", st)
	}
	if _, err := os.Stat(p.sock.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its socket's folder %s: %v, want it removed", p.sock.path, err)
	}
}

// A plugin that exits in the middle of a call: the call fails with the
// reason and the plugin's last stderr line, and so does every later one,
// with the same error.
func TestClientPluginDiesMidCall(t *testing.T) {
	p, _ := startGuest(t, "dies", 10*time.Second)
	_, err := p.Query([]byte("die"))
	const want = "it exited during Query; its stderr: guestplugin: dying in the middle of a call; stopped it"
	if !errors.Is(err, mpierr.ErrComponentNotFound) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want ErrComponentNotFound saying %q", err, want)
	}
	if !p.Exited() {
		t.Error("the process has not ended")
	}
	if _, again := p.Query([]byte("echo:x")); again == nil || again.Error() != err.Error() {
		t.Errorf("the next call: %v, want the same error", again)
	}
}

// A call that gets no answer within the timeout fails saying so, and the
// plugin is killed.
func TestClientCallTimeout(t *testing.T) {
	p, _ := startGuest(t, "slow", time.Second)
	_, err := p.Query([]byte("sleep:1h"))
	if want := "no answer to Query within 1s (mca_base_plugin_timeout)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %q", err, want)
	}
	if !p.Exited() {
		t.Error("the plugin that did not answer still runs")
	}
}

// A plugin that writes much more than a pipe holds to its stdout and
// stderr, through go-plugin's stdio stream and through the pipes, in a
// call: the call is answered (nothing blocks it), its stderr lines reach
// the log, first to last, and its stdout is thrown away.
func TestClientChattyPlugin(t *testing.T) {
	p, out := startGuest(t, "chatty", 20*time.Second)
	const n = 300_000
	if b, err := p.Query([]byte(fmt.Sprint("chatty:", n))); err != nil || string(b) != "ok" {
		t.Fatalf("chatty: %q, %v", b, err)
	}
	p.Stop()
	log := out.String()
	lines := func(where string) int { return strings.Count(log, "gompi-coll-chatty: "+where+" line ") }
	// Each writer wrote lines "<where> line <k>" until n bytes.
	want := func(where string) int {
		k, sent := 0, 0
		for ; sent < n; k++ {
			sent += len(fmt.Sprintf("%s line %d\n", where, k))
		}
		return k
	}
	for _, where := range []string{"stream-err", "pipe-err"} {
		if got, w := lines(where), want(where); got != w {
			t.Errorf("%d lines from %s in the log, want %d", got, where, w)
		}
	}
	for _, where := range []string{"stream-out", "pipe-out"} {
		if got := lines(where); got != 0 {
			t.Errorf("%d lines of stdout (%s) in the log, want none", got, where)
		}
	}
}

// What a plugin writes to its stdio stream just before it is stopped still
// reaches the log: Stop waits for the stream to go quiet before go-plugin's
// Shutdown, which cuts it.
func TestClientStopKeepsTrailingOutput(t *testing.T) {
	p, out := startGuest(t, "trailing", 20*time.Second)
	const n = 6
	if b, err := p.Query([]byte(fmt.Sprint("trailing:", n))); err != nil || string(b) != "ok" {
		t.Fatalf("trailing: %q, %v", b, err)
	}
	p.Stop()
	log := out.String()
	for k := 0; k < n; k++ {
		if line := fmt.Sprintf("trailing line %d", k); !strings.Contains(log, line) {
			t.Errorf("%q is not in the log:\n%s", line, log)
		}
	}
}

// What a plugin prints first, when it is not a handshake the host can use
// (or leads nowhere), is refused with the reason, and the plugin stopped.
func TestClientBadHandshake(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, line, says string
	}{
		{"relative", "1|1|unix|relative/sock|grpc", `its go-plugin handshake "1|1|unix|relative/sock|grpc": socket "relative/sock" is not an absolute path`},
		{"netrpc", "1|1|tcp|127.0.0.1:1|netrpc", `protocol "netrpc": gompi speaks grpc only`},
		{"noproto", "1|1|tcp|127.0.0.1:1", `protocol "netrpc": gompi speaks grpc only`},
		{"core", "2|1|unix|/x|grpc", `go-plugin core protocol "2"; gompi speaks 1`},
		{"api", "1|7|unix|/x|grpc", "built for coll API 7.x, but this gompi has coll API 1.x (major versions must match)"},
		{"network", "1|1|udp|127.0.0.1:9|grpc", `network "udp": tcp or unix`},
		{"nosocket", "1|1|unix|" + filepath.Join(dir, "none", "sock") + "|grpc", "it could not be reached at unix " + filepath.Join(dir, "none", "sock")},
		{"long", strings.Repeat("x", 100_000), `not a plugin: its first line of output, "` + strings.Repeat("x", 200) + `…", is not a go-plugin handshake`},
	} {
		path := filepath.Join(dir, "gompi-coll-"+c.name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\nprintf '%s\\n' '"+c.line+"'\nexec sleep 30\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		var out syncBuffer
		p, err := start(path, "coll", 1, 10*time.Second, testLogger(&out))
		if err == nil {
			p.kill()
			t.Errorf("%s: started", c.name)
			continue
		}
		if !errors.Is(err, mpierr.ErrComponentNotFound) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrComponentNotFound saying %q", c.name, err, c.says)
		}
	}
}
