// Package pmi speaks PMI-1, the process-management wire protocol of MPICH's
// simple PMI and Hydra, both as a client (in every rank) and as a server (in
// mpirun, and in-process for singletons and goroutine ranks). The client
// also speaks PMI-2 (wire2.go, client2.go), for srun --mpi=pmi2.
//
// A command is one line: "cmd=<name>" followed by space-separated key=value
// tokens, ended by a newline. Values end at a space or newline; a backslash
// escapes the next character. gompi's own values never need escaping (the
// modex encodes its data in a safe alphabet), but text such as an abort
// message is escaped and unescaped as current MPICH does.
package pmi

import (
	"fmt"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// MaxLine bounds a line this package reads. Hydra's lines stay under 1024
// bytes; gompi's server advertises larger values (see Server) and so accepts
// longer lines, but not unbounded ones.
const MaxLine = 1 << 20

// Arg is one key=value token.
type Arg struct{ Key, Value string }

// Command is one PMI-1 line.
type Command struct {
	Name string
	Args []Arg
}

// Get returns the value of the first token with that key.
func (c Command) Get(key string) (string, bool) {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Cmd builds a command from alternating keys and values.
func Cmd(name string, kv ...string) Command {
	c := Command{Name: name}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Args = append(c.Args, Arg{kv[i], kv[i+1]})
	}
	return c
}

// Encode returns the wire form, newline included.
func (c Command) Encode() []byte {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(escape(c.Name))
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(escape(a.Key))
		b.WriteByte('=')
		b.WriteString(escape(a.Value))
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

func (c Command) String() string { return strings.TrimSuffix(string(c.Encode()), "\n") }

// escape protects the bytes that would end or split a token. Tab, CR and
// newline are written as \t, \r and \n; other control bytes (NUL among
// them) cannot travel in a C string and become '?': they only ever occur in
// text such as an abort message.
func escape(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '\\' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < ' ' || c == 0x7f:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ParseLine parses one line (without its newline). Errors carry
// mpierr.ErrIntern: a malformed line is a protocol violation by the peer.
func ParseLine(line string) (Command, error) {
	line = strings.TrimSuffix(line, "\r")
	if len(line) > MaxLine {
		return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi: line of %d bytes exceeds %d", len(line), MaxLine)
	}
	toks, err := tokens(line)
	if err != nil {
		return Command{}, err
	}
	if len(toks) == 0 {
		return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi: empty line")
	}
	k, v, ok := strings.Cut(toks[0], "=")
	if !ok || (k != "cmd" && k != "mcmd") || v == "" {
		return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi: line %q does not start with cmd=<name>", abbreviate(line))
	}
	c := Command{Name: v}
	for _, t := range toks[1:] {
		k, v, _ := strings.Cut(t, "=")
		if k == "" {
			return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi: token %q in %q has no key", abbreviate(t), abbreviate(line))
		}
		c.Args = append(c.Args, Arg{k, v})
	}
	return c, nil
}

// tokens splits at unescaped blanks and removes the escapes. The '=' that
// separates a key from its value is never escaped, so it is kept as is.
func tokens(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inTok := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\':
			if i+1 >= len(line) {
				return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: line %q ends in a lone backslash", abbreviate(line))
			}
			i++
			switch line[i] {
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			case 'r':
				cur.WriteByte('\r')
			default:
				cur.WriteByte(line[i])
			}
			inTok = true
		case c == ' ' || c == '\t':
			if inTok {
				out = append(out, cur.String())
				cur.Reset()
				inTok = false
			}
		case c == '\n' || c == 0:
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: line %q holds a control byte 0x%02x", abbreviate(line), c)
		default:
			cur.WriteByte(c)
			inTok = true
		}
	}
	if inTok {
		out = append(out, cur.String())
	}
	return out, nil
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// rcError turns a response's rc/msg into an error, or nil for rc=0 (or no
// rc at all, which Hydra sends for some responses).
func rcError(c Command, what string) error {
	rc, ok := c.Get("rc")
	if !ok || rc == "0" {
		return nil
	}
	msg, _ := c.Get("msg")
	return mpierr.Errorf(mpierr.ErrOther, "pmi: %s failed: rc=%s %s", what, rc, msg)
}

// expect checks that a response has the wanted name.
func expect(c Command, name string) error {
	if c.Name != name {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi: expected cmd=%s, got %q", name, c.String())
	}
	return nil
}

func atoiArg(c Command, key string) (int, error) {
	v, ok := c.Get(key)
	if !ok {
		return 0, mpierr.Errorf(mpierr.ErrIntern, "pmi: %q lacks %s", c.String(), key)
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v {
		return 0, mpierr.Errorf(mpierr.ErrIntern, "pmi: %s=%q in %q is not a number", key, v, c.String())
	}
	return n, nil
}
