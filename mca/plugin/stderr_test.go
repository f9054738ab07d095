package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mpierr"
)

// syncBuffer is a log's output, written by go-plugin's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger(out *syncBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Trace, DisableTime: true})
}

// hostileLines is stderr that crashed go-plugin's parser (a non-string
// @message, @level or @timestamp), or that is hard to read: a JSON value
// that is no object, a nested @message, invalid UTF-8, a line longer than
// any buffer; around lines that must keep their level.
const hostileLines = `{"@message":1}
{"@level":2,"@message":"level two"}
{"@level":"info","@message":"stamped","@timestamp":3}
{"@level":"error","@message":{"nested":true}}
{"@level":["warn"],"@message":"list"}
null
[1,2]
{"@level":"warn","@message":"hostile says hi","k":"v","@timestamp":"2026-01-02T03:04:05.000000Z"}
[WARN] a warning by prefix
bad ` + "\xff\xfe" + ` utf8
`

// A stderr line becomes one line of the tail and one log entry, whatever
// pieces it comes in: hclog JSON at its level with its fields, anything
// else (hostile JSON included) at debug as it is, invalid UTF-8 replaced,
// a line past maxStderrLine cut with the count of what was dropped, and a
// last line without a newline emitted by Flush.
func TestStderrLines(t *testing.T) {
	long := strings.Repeat("x", maxStderrLine+100)
	in := hostileLines + long + "\n" + "no newline at the end"
	for _, piece := range []int{1, 7, 4096, len(in)} {
		var out syncBuffer
		tl := &tail{}
		s := &stderrLog{log: testLogger(&out), tail: tl}
		for b := []byte(in); len(b) > 0; {
			n := min(piece, len(b))
			if k, err := s.Write(b[:n]); k != n || err != nil {
				t.Fatalf("Write: %d, %v", k, err)
			}
			b = b[n:]
		}
		if strings.Contains(out.String(), "no newline at the end") {
			t.Errorf("pieces of %d: the unfinished line was logged before Flush", piece)
		}
		s.Flush()
		log := out.String()
		for _, want := range []string{
			"[DEBUG] {\"@message\":1}\n",
			"[DEBUG] {\"@level\":2,\"@message\":\"level two\"}\n",
			"[DEBUG] {\"@level\":\"info\",\"@message\":\"stamped\",\"@timestamp\":3}\n",
			"[DEBUG] {\"@level\":\"error\",\"@message\":{\"nested\":true}}\n",
			"[DEBUG] {\"@level\":[\"warn\"],\"@message\":\"list\"}\n",
			"[DEBUG] null\n",
			"[DEBUG] [1,2]\n",
			"[WARN]  hostile says hi: k=v timestamp=2026-01-02T03:04:05.000Z\n",
			"[WARN]  [WARN] a warning by prefix\n",
			"[DEBUG] bad \uFFFD utf8\n",
			"[DEBUG] " + long[:maxStderrLine] + " … (100 more bytes)\n",
			"[DEBUG] no newline at the end\n",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("pieces of %d: the log lacks %.80q", piece, want)
			}
		}
		if n := strings.Count(log, "\n"); n != 12 {
			t.Errorf("pieces of %d: %d log lines, want 12", piece, n)
		}
		tailText := tl.String()
		if !strings.HasSuffix(tailText, " … (100 more bytes)\nno newline at the end\n") || !utf8.ValidString(tailText) {
			t.Errorf("pieces of %d: the tail ends %q", piece, tailText[max(0, len(tailText)-80):])
		}
	}
}

// Plugins that write hostile stderr and then fail to start (go-plugin's
// parser panicked on such lines, taking the host down): start returns the
// reason, which quotes the plugin's stderr as before, and the lines reach
// the log.
func TestHostileStderrAtStart(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// printf's octal escapes, which every sh has, for the invalid UTF-8.
	hostile := "printf '%s' '" + strings.ReplaceAll(hostileLines, "\xff\xfe", "'\"$(printf '\\377\\376')\"'") + "' >&2\n" +
		"head -c 200000 /dev/zero | tr '\\0' x >&2; echo >&2\n"
	for _, c := range []struct {
		name, body, says string
	}{
		{"gompi-coll-exits", hostile + "printf 'panic: hostile end' >&2\nexit 2\n",
			"it exited during start-up, before the go-plugin handshake; its stderr: panic: hostile end"},
		{"gompi-coll-chatters", hostile + "echo 'hello from a script'\nexec sleep 30\n",
			`not a plugin: its first line of output, "hello from a script", is not a go-plugin handshake`},
		{"gompi-coll-onlybad", "echo '{\"@message\":1}' >&2\nexit 1\n",
			`it exited during start-up, before the go-plugin handshake; its stderr: {"@message":1}`},
	} {
		var out syncBuffer
		path := script(c.name, c.body)
		p, err := start(path, "coll", 1, 10*time.Second, testLogger(&out))
		if err == nil {
			p.Stop()
			t.Fatalf("%s started", c.name)
		}
		if !errors.Is(err, mpierr.ErrComponentNotFound) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrComponentNotFound saying %q", c.name, err, c.says)
		}
		if c.name == "gompi-coll-onlybad" {
			continue
		}
		log := out.String()
		for _, want := range []string{
			"[DEBUG] " + c.name + ": {\"@message\":1}\n",
			"[WARN]  " + c.name + ": hostile says hi: k=v timestamp=2026-01-02T03:04:05.000Z\n",
			"[DEBUG] " + c.name + ": bad \uFFFD utf8\n",
			fmt.Sprintf(" … (%d more bytes)\n", 200000-maxStderrLine),
		} {
			if !strings.Contains(log, want) {
				t.Errorf("%s: the log lacks %q", c.name, want)
			}
		}
	}
}

// FuzzStderrLog: a plugin writes any bytes to stderr, in pieces of any
// size, lines of any length. Each line (a piece of the input between
// newlines) comes out as one line of the tail, cut at maxStderrLine with
// the count of the rest, in valid UTF-8, the same whatever the pieces;
// parsing it for the log never panics and gives a level hclog logs at.
func FuzzStderrLog(f *testing.F) {
	f.Add([]byte(hostileLines), uint16(1), uint8(3))
	f.Add([]byte(`{"@level":"info","@message":"m","@timestamp":"2026-01-02T03:04:05.000000Z","a":[1,{"b":null}]}`+"\n"), uint16(1), uint8(0))
	f.Add([]byte("x"), uint16(40000), uint8(200))
	f.Add([]byte("\xff\r\n\n\r"), uint16(3), uint8(1))
	f.Fuzz(func(t *testing.T, unit []byte, repeat uint16, piece uint8) {
		in := bytes.Repeat(unit, int(repeat)%(3*maxStderrLine/max(1, len(unit))+2))
		tl := &tail{}
		s := &stderrLog{tail: tl}
		step := 1 + int(piece)
		for b := in; len(b) > 0; {
			n := min(step, len(b))
			if k, err := s.Write(b[:n]); k != n || err != nil {
				t.Fatalf("Write: %d, %v", k, err)
			}
			b = b[n:]
		}
		s.Flush()
		var want strings.Builder
		raw := bytes.Split(in, []byte{'\n'})
		if len(raw[len(raw)-1]) == 0 {
			raw = raw[:len(raw)-1] // the input ended with a newline
		}
		for _, r := range raw {
			dropped := max(0, len(r)-maxStderrLine)
			want.WriteString(cleanLine(r[:len(r)-dropped], dropped) + "\n")
		}
		w := want.String()
		if len(w) > tailBytes {
			w = w[len(w)-tailBytes:]
		}
		got := tl.String()
		if got != w {
			t.Fatalf("tail %.200q…, want %.200q…", got, w)
		}
		for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			level, msg, args := parseLine(line)
			if level < hclog.Trace || level > hclog.Error || len(args)%2 != 0 {
				t.Fatalf("%q: level %v, %d args", line, level, len(args))
			}
			if !strings.HasPrefix(line, "{") && (msg != line || len(args) > 0) {
				t.Fatalf("%q: logged as %q", line, msg)
			}
		}
	})
}
