package params

import (
	"strconv"
	"strings"
)

// scanTOMLKeyLines finds the line on which each key of a TOML document is
// written, keyed by its full path joined with NUL. The TOML decoder does not
// export positions, so we scan ourselves: table headers set the current path,
// "key = value" records current path + key, and values (strings, multi-line
// strings, arrays, inline tables) are skipped so that their contents are not
// mistaken for keys. It expects a document the decoder accepted, but never
// panics or loops on any input.
func scanTOMLKeyLines(src []byte) map[string]int {
	s := &tomlScanner{src: src, line: 1}
	out := map[string]int{}
	var table []string
	for {
		s.skipBlankAndComments()
		if s.eof() {
			return out
		}
		start := s.line
		if s.peek() == '[' {
			s.i++
			array := !s.eof() && s.peek() == '['
			if array {
				s.i++
			}
			parts, ok := s.key()
			if ok {
				table = parts
				out[strings.Join(parts, "\x00")] = start
			}
			s.skipLine()
			continue
		}
		parts, ok := s.key()
		if !ok {
			s.skipLine()
			continue
		}
		s.skipSpaces()
		if s.eof() || s.peek() != '=' {
			s.skipLine()
			continue
		}
		s.i++
		full := append(append([]string(nil), table...), parts...)
		out[strings.Join(full, "\x00")] = start
		s.skipValue()
	}
}

type tomlScanner struct {
	src  []byte
	i    int
	line int
}

func (s *tomlScanner) eof() bool  { return s.i >= len(s.src) }
func (s *tomlScanner) peek() byte { return s.src[s.i] }

func (s *tomlScanner) skipSpaces() {
	for !s.eof() && (s.peek() == ' ' || s.peek() == '\t') {
		s.i++
	}
}

func (s *tomlScanner) skipLine() {
	for !s.eof() {
		c := s.src[s.i]
		s.i++
		if c == '\n' {
			s.line++
			return
		}
	}
}

func (s *tomlScanner) skipBlankAndComments() {
	for !s.eof() {
		switch s.peek() {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			s.i++
			s.line++
		case '#':
			s.skipLine()
		default:
			return
		}
	}
}

// key reads a dotted key (bare, "basic" or 'literal' parts).
func (s *tomlScanner) key() ([]string, bool) {
	var parts []string
	for {
		s.skipSpaces()
		if s.eof() {
			return nil, false
		}
		var part string
		switch c := s.peek(); {
		case c == '"':
			str, ok := s.basicString()
			if !ok {
				return nil, false
			}
			part = str
		case c == '\'':
			end := strings.IndexAny(string(s.src[s.i+1:]), "'\n")
			if end < 0 || s.src[s.i+1+end] != '\'' {
				return nil, false
			}
			part = string(s.src[s.i+1 : s.i+1+end])
			s.i += end + 2
		case isBareKeyChar(c):
			j := s.i
			for j < len(s.src) && isBareKeyChar(s.src[j]) {
				j++
			}
			part = string(s.src[s.i:j])
			s.i = j
		default:
			return nil, false
		}
		parts = append(parts, part)
		s.skipSpaces()
		if s.eof() || s.peek() != '.' {
			return parts, true
		}
		s.i++
	}
}

func isBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// basicString reads a one-line "…" string starting at the quote and decodes
// its escapes the way Go does (close enough to TOML's for keys).
func (s *tomlScanner) basicString() (string, bool) {
	j := s.i + 1
	for j < len(s.src) && s.src[j] != '"' && s.src[j] != '\n' {
		if s.src[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(s.src) || s.src[j] != '"' {
		return "", false
	}
	raw := string(s.src[s.i : j+1])
	s.i = j + 1
	if v, err := strconv.Unquote(raw); err == nil {
		return v, true
	}
	return raw[1 : len(raw)-1], true
}

// skipValue skips a value up to the end of its last line, following strings,
// arrays and inline tables across lines.
func (s *tomlScanner) skipValue() {
	depth := 0
	for !s.eof() {
		c := s.src[s.i]
		switch {
		case c == '\n':
			s.i++
			s.line++
			if depth <= 0 {
				return
			}
		case c == '#':
			for !s.eof() && s.peek() != '\n' {
				s.i++
			}
		case c == '"' || c == '\'':
			s.skipString(c)
		case c == '[' || c == '{':
			depth++
			s.i++
		case c == ']' || c == '}':
			depth--
			s.i++
		default:
			s.i++
		}
	}
}

// skipString skips a string that starts at the current quote, single- or
// multi-line, counting the newlines inside it.
func (s *tomlScanner) skipString(q byte) {
	triple := s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q
	if triple {
		s.i += 3
		for !s.eof() {
			c := s.src[s.i]
			if c == '\\' && q == '"' {
				s.i += 2
				if s.i <= len(s.src) && s.src[s.i-1] == '\n' {
					s.line++
				}
				continue
			}
			if c == '\n' {
				s.line++
			}
			if c == q && s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q {
				s.i += 3
				// A closing delimiter may be followed by up to two more quotes.
				for n := 0; n < 2 && !s.eof() && s.peek() == q; n++ {
					s.i++
				}
				return
			}
			s.i++
		}
		return
	}
	s.i++
	for !s.eof() {
		c := s.src[s.i]
		if c == '\n' {
			return // unterminated: let skipValue count the newline
		}
		if c == '\\' && q == '"' {
			s.i += 2
			continue
		}
		s.i++
		if c == q {
			return
		}
	}
}
