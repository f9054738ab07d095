package params

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/gompi/gompi/mpierr"
)

// maxParamFile bounds what readParamFile reads: a parameter is a line of
// tens of bytes, and mca_base_param_files naming a device or a huge file by
// mistake must not take all memory.
const maxParamFile = 16 << 20

// readParamFile reads one parameter file, choosing the syntax by extension
// (checked first: /dev/zero is no parameter file).
func readParamFile(path string) ([]setting, error) {
	parse := map[string]func(string, []byte) ([]setting, error){".toml": ParseTOMLFile, ".conf": ParseConfFile}[strings.ToLower(filepath.Ext(path))]
	if parse == nil {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"parameter file %s: unknown format %q; accepted extensions: .toml (TOML), .conf (name = value lines)",
			path, filepath.Ext(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "reading parameter file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxParamFile+1))
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "reading parameter file %s: %w", path, err)
	}
	if len(data) > maxParamFile {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "parameter file %s is larger than %d MiB", path, maxParamFile>>20)
	}
	return parse(path, data)
}

func fileError(path string, line int, format string, a ...any) error {
	return mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s:%d: %s", path, line, fmt.Sprintf(format, a...))
}

// ParseConfFile parses the classic "name = value" form: one setting per line,
// blank lines and lines starting with # ignored. Unlike Open MPI, a value may
// be quoted (the quotes are removed) and may be followed by a # comment after
// a blank. Naming a parameter twice in one file is an error.
func ParseConfFile(path string, data []byte) ([]setting, error) {
	var out []setting
	seen := map[string]int{}
	for i, raw := range strings.Split(string(data), "\n") {
		line := i + 1
		text := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		if text == "" || text[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fileError(path, line, "expected \"name = value\", found %q", clip(text))
		}
		name = strings.TrimSpace(name)
		if !paramNameRE.MatchString(name) {
			return nil, fileError(path, line, "%q is not a parameter name (lower case letters, digits and '_', starting with a letter)", clip(name))
		}
		if prev, dup := seen[name]; dup {
			return nil, fileError(path, line, "%s is already set on line %d", name, prev)
		}
		seen[name] = line
		v, err := confValue(value)
		if err != nil {
			return nil, fileError(path, line, "value of %s: %v", name, err)
		}
		out = append(out, setting{name: name, text: v, src: Source{Kind: FromFile, File: path, Line: line}})
	}
	return out, nil
}

// maxQuoted bounds the text an error quotes from a file: a line of
// megabytes (a binary file given by mistake) makes a message, not a flood.
const maxQuoted = 80

// clip is s, or its first maxQuoted bytes and a count of the rest.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:maxQuoted], len(s)-maxQuoted)
}

// confValue removes a trailing comment and one pair of surrounding quotes.
func confValue(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return "", fmt.Errorf("unterminated quote")
		}
		rest := strings.TrimSpace(s[end+2:])
		if rest != "" && rest[0] != '#' {
			return "", fmt.Errorf("unexpected text %q after the quoted value", clip(rest))
		}
		return s[1 : end+1], nil
	}
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimSpace(s[:i]), nil
		}
	}
	return s, nil
}

// ParseTOMLFile parses a TOML parameter file. Keys are full parameter names;
// a nested table stands for the names its path spells ([btl.tcp] if_include
// is btl_tcp_if_include). Two spellings of one name, or a key that is both a
// value and a table, are errors that say to use full names.
func ParseTOMLFile(path string, data []byte) ([]setting, error) {
	var doc map[string]any
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			if strings.Contains(pe.Message, "already created as a hash") || strings.Contains(pe.Message, "already been defined") {
				return nil, fileError(path, pe.Position.Line, "%s; write such parameters with their full names (btl = \"self,tcp\" and btl_tcp_if_include = \"lo\", not a [btl.tcp] table beside btl)", pe.Message)
			}
			return nil, fileError(path, pe.Position.Line, "%s", pe.Message)
		}
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s: %w", path, err)
	}
	lines := scanTOMLKeyLines(data)
	keys := md.Keys()

	// A leaf that is also a prefix of another key is a value and a table at
	// once; the decoder keeps only one of them, so refuse it here.
	leaves := map[string]toml.Key{}
	for _, k := range keys {
		if t := md.Type(k...); t != "Hash" && t != "ArrayHash" {
			leaves[strings.Join(k, "\x00")] = k
		}
	}
	var out []setting
	byName := map[string]setting{}
	for _, k := range keys {
		typ := md.Type(k...)
		line := keyLine(lines, k)
		if typ == "ArrayHash" {
			return nil, fileError(path, line, "[[%s]] is an array of tables; parameters are plain keys", k)
		}
		if typ == "Hash" || underArrayTable(md, k) {
			continue
		}
		for i := 1; i < len(k); i++ {
			if _, ok := leaves[strings.Join(k[:i], "\x00")]; ok {
				return nil, fileError(path, line, "%q is set as a value and also used as a table (%s); write such parameters with their full names",
					k[:i].String(), k)
			}
		}
		name := strings.Join(k, "_")
		if prev, dup := byName[name]; dup {
			return nil, fileError(path, line, "%s is set twice (line %d and line %d); write it once, with its full name", name, prev.src.Line, line)
		}
		val, ok := lookupTOML(doc, k)
		if !ok {
			return nil, fileError(path, line, "%s is set as a value and also used as a table; write such parameters with their full names", k)
		}
		s := setting{name: name, typed: val, src: Source{Kind: FromFile, File: path, Line: line}}
		if str, isStr := val.(string); isStr {
			s.text = str
		}
		byName[name] = s
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].src.Line < out[j].src.Line })
	return out, nil
}

func underArrayTable(md toml.MetaData, k toml.Key) bool {
	for i := 1; i < len(k); i++ {
		if md.Type(k[:i]...) == "ArrayHash" {
			return true
		}
	}
	return false
}

func lookupTOML(doc map[string]any, k toml.Key) (any, bool) {
	var cur any = doc
	for _, part := range k {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[part]
		if !ok {
			return nil, false
		}
	}
	if _, isTable := cur.(map[string]any); isTable {
		return nil, false
	}
	return cur, true
}

// keyLine returns the line where key k (or, for keys inside inline tables,
// its nearest enclosing key) was written; 0 when the scan did not find it.
func keyLine(lines map[string]int, k toml.Key) int {
	for i := len(k); i > 0; i-- {
		if l, ok := lines[strings.Join(k[:i], "\x00")]; ok {
			return l
		}
	}
	return 0
}
