package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gompi/gompi/params"
)

// The pretty form: a label right-aligned in 24 columns, ": ", the text;
// continuation lines indented 26 columns. Lines are never wrapped, so that
// grep works.
func line(w io.Writer, label, text string) {
	fmt.Fprintf(w, "%24s: %s\n", label, text)
}

func more(w io.Writer, text string) {
	fmt.Fprintf(w, "%26s%s\n", "", text)
}

func writePretty(w io.Writer, doc *document) {
	if p := doc.Package; p != nil {
		line(w, "Package", p.Name)
		line(w, "gompi", p.Version)
		line(w, "MCA", p.MCAVersion)
		line(w, "Go", p.GoVersion)
	}
	if cs := doc.CollSlots; cs != nil {
		line(w, "MCA coll slots", "blocking: "+strings.Join(cs.Blocking, " "))
		line(w, "MCA coll slots", "nonblocking: "+strings.Join(cs.Nonblocking, " "))
		line(w, "MCA coll slots", "persistent: "+strings.Join(cs.Persistent, " ")+" (each Start runs the nonblocking slot's plan)")
	}
	for _, c := range doc.Components {
		line(w, "MCA "+c.Framework, fmt.Sprintf("%s (MCA v%s, API v%s, Component v%s, %s)",
			c.Name, c.MCAVersion, c.APIVersion, c.Version, c.Origin))
	}
	for _, sk := range doc.Skipped {
		line(w, "Skipped plugin", sk.Path+": "+sk.Reason)
	}
	lastGroup := ""
	for _, p := range doc.Params {
		label := "MCA " + p.Framework + " " + p.Component
		if p.Disabled {
			label = "MCA (-) " + p.Framework + " " + p.Component
		}
		if label != lastGroup {
			line(w, label, strings.Repeat("-", 51))
			lastGroup = label
		}
		kind := "parameter"
		if p.Status == "read-only" {
			kind = "informational"
		}
		extra := ""
		if p.Deprecated {
			extra += ", deprecated"
		}
		if len(p.Synonyms) > 0 {
			extra += ", synonyms: " + strings.Join(p.Synonyms, ", ")
		}
		if p.SynonymOf != "" {
			extra += ", synonym of: " + p.SynonymOf
		}
		line(w, label, fmt.Sprintf("%s %q (current value: %q, data source: %s, level: %d %s, type: %s%s)",
			kind, p.Name, p.Value, p.Source, p.Level, params.LevelName(p.Level), p.Type, extra))
		if p.Help != "" {
			more(w, p.Help)
		}
		if vv := validValues(p); vv != "" {
			more(w, "Valid values: "+vv)
		}
	}
}

func validValues(p paramInfo) string {
	var parts []string
	switch p.Type {
	case "bool":
		return "0: 0|false|no|off|disabled, 1: 1|true|yes|on|enabled (any case)"
	case "list":
		for _, e := range p.Enumerators {
			parts = append(parts, fmt.Sprintf("%q", e.Name))
		}
		if len(parts) == 0 {
			return ""
		}
		return "Comma-delimited list of: " + strings.Join(parts, ", ")
	}
	for _, e := range p.Enumerators {
		parts = append(parts, fmt.Sprintf("%d:%q", e.Value, e.Name))
	}
	if p.Range != nil {
		parts = append(parts, fmt.Sprintf("%d - %d", p.Range[0], p.Range[1]))
	}
	return strings.Join(parts, ", ")
}

// parsableValue quotes a value that holds the separator, as Open MPI does.
func parsableValue(v string) string {
	if !strings.Contains(v, ":") {
		return v
	}
	return `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
}

// writeParsable prints the colon-separated form, one fact per line.
func writeParsable(w io.Writer, doc *document) {
	for _, l := range parsableLines(doc) {
		fmt.Fprintln(w, l)
	}
}

func parsableLines(doc *document) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	if p := doc.Package; p != nil {
		add("package:%s", p.Name)
		add("gompi:version:full:%s", p.Version)
		add("mca-api:version:full:%s", p.MCAVersion)
		add("go:version:full:%s", p.GoVersion)
	}
	if cs := doc.CollSlots; cs != nil {
		add("coll:slots:blocking:%s", strings.Join(cs.Blocking, ","))
		add("coll:slots:nonblocking:%s", strings.Join(cs.Nonblocking, ","))
		add("coll:slots:persistent:%s", strings.Join(cs.Persistent, ","))
	}
	for _, c := range doc.Components {
		prefix := "mca:" + c.Framework + ":" + c.Name
		add("%s:version:%s", prefix, parsableValue("mca:"+c.MCAVersion))
		add("%s:version:%s", prefix, parsableValue("api:"+c.APIVersion))
		add("%s:version:%s", prefix, parsableValue("component:"+c.Version))
		add("%s:origin:%s", prefix, parsableValue(c.Origin))
	}
	for _, sk := range doc.Skipped {
		add("plugin:skipped:%s:%s", parsableValue(sk.Path), parsableValue(sk.Reason))
	}
	for _, p := range doc.Params {
		prefix := fmt.Sprintf("mca:%s:%s:param:%s", p.Framework, p.Component, p.Name)
		add("%s:value:%s", prefix, parsableValue(p.Value))
		add("%s:source:%s", prefix, p.Source)
		add("%s:status:%s", prefix, p.Status)
		add("%s:level:%d", prefix, p.Level)
		if p.Help != "" {
			add("%s:help:%s", prefix, p.Help)
		}
		for _, e := range p.Enumerators {
			add("%s:enumerator:value:%d:%s", prefix, e.Value, e.Name)
		}
		if p.Range != nil {
			add("%s:range:%d:%d", prefix, p.Range[0], p.Range[1])
		}
		add("%s:deprecated:%s", prefix, yesNo(p.Deprecated))
		add("%s:type:%s", prefix, p.Type)
		for _, s := range p.Synonyms {
			add("%s:synonym:name:%s", prefix, s)
		}
		if p.SynonymOf != "" {
			add("%s:synonym_of:name:%s", prefix, p.SynonymOf)
		}
		add("%s:disabled:%t", prefix, p.Disabled)
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
