package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A plugin's stderr is outside input, read by gompi's own parser:
// go-plugin v1.8.0's client parses each line as hclog JSON and panics,
// taking the host down, when @message, @level or @timestamp is not a string
// (hashicorp/go-plugin#38). The host reads the pipe and go-plugin's stdio
// stream itself (client.go) and cuts them into lines here.

// maxStderrLine is the longest stderr line kept whole (go-plugin's own
// read buffer); the rest of a longer line is dropped and counted.
const maxStderrLine = 64 << 10

// stderrLog cuts a plugin's stderr into lines, keeps them in the tail (the
// reason of a failure quotes them) and re-emits them in the host's log.
// It takes its input in pieces of any size.
type stderrLog struct {
	log  hclog.Logger
	tail *tail

	mu      sync.Mutex
	line    []byte // the line so far, at most maxStderrLine bytes
	dropped int    // bytes of the line past maxStderrLine
}

func (s *stderrLog) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		piece, rest, newline := bytes.Cut(b, []byte{'\n'})
		room := maxStderrLine - len(s.line)
		if len(piece) > room {
			s.dropped += len(piece) - room
			piece = piece[:room]
		}
		s.line = append(s.line, piece...)
		if !newline {
			break
		}
		s.emit()
		b = rest
	}
	return n, nil
}

// Flush emits the last line when it has no newline yet: a plugin's pipe or
// its stdio stream may stop mid-line.
func (s *stderrLog) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 || s.dropped > 0 {
		s.emit()
	}
}

func (s *stderrLog) emit() {
	line := cleanLine(s.line, s.dropped)
	s.line, s.dropped = s.line[:0], 0
	_, _ = s.tail.Write([]byte(line + "\n"))
	if s.log != nil {
		logLine(s.log, line)
	}
}

// cleanLine is a raw stderr line as the host shows it: valid UTF-8 (a
// plugin may write any bytes), without a carriage return at its end, and
// saying how much of it was dropped.
func cleanLine(raw []byte, dropped int) string {
	line := strings.ToValidUTF8(string(bytes.TrimSuffix(raw, []byte{'\r'})), "\uFFFD")
	if dropped > 0 {
		line += fmt.Sprintf(" … (%d more bytes)", dropped)
	}
	return line
}

// logLine logs one stderr line at the level parseLine gives it.
func logLine(log hclog.Logger, line string) {
	level, msg, args := parseLine(line)
	log.Log(level, msg, args...)
}

// parseLine reads a stderr line as go-plugin would, with its types
// checked: a JSON object whose @level names a level and whose @message, if
// any, is a string (hclog's JSON format) is that level, that message and
// its other keys as fields (sorted, so that logs diff cleanly); any other line is
// itself at debug level, or at that of a leading [TRACE], [DEBUG], [INFO]
// or [WARN]. A panic's lines stay at debug: the host reports a crash
// itself, once, with its first lines.
func parseLine(line string) (hclog.Level, string, []any) {
	if level, msg, args, ok := parseJSONLine(line); ok {
		return level, msg, args
	}
	for _, p := range []struct {
		prefix string
		level  hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}} {
		if strings.HasPrefix(line, p.prefix) {
			return p.level, line, nil
		}
	}
	return hclog.Debug, line, nil
}

// hclogTime is the layout of hclog's JSON @timestamp.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

func parseJSONLine(line string) (hclog.Level, string, []any, bool) {
	if !strings.HasPrefix(line, "{") {
		return 0, "", nil, false
	}
	var raw map[string]any
	if json.Unmarshal([]byte(line), &raw) != nil {
		return 0, "", nil, false
	}
	levelText, ok := raw["@level"].(string)
	if !ok {
		return 0, "", nil, false
	}
	var msg string
	if v, ok := raw["@message"]; ok {
		if msg, ok = v.(string); !ok {
			return 0, "", nil, false
		}
	}
	level := hclog.LevelFromString(levelText)
	if level == hclog.NoLevel || level == hclog.Off {
		return 0, "", nil, false
	}
	var stamp string
	if v, ok := raw["@timestamp"]; ok {
		text, _ := v.(string)
		t, err := time.Parse(hclogTime, text)
		if err != nil {
			return 0, "", nil, false
		}
		stamp = t.Format(hclog.TimeFormat)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		if k != "@level" && k != "@message" && k != "@timestamp" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var args []any
	for _, k := range keys {
		args = append(args, k, raw[k])
	}
	if stamp != "" {
		args = append(args, "timestamp", stamp)
	}
	return level, msg, args, true
}
