package params

import "fmt"

// SourceKind orders the places a value can come from, lowest precedence
// first.
type SourceKind uint8

const (
	FromDefault SourceKind = iota
	FromFile
	FromEnvironment
	FromCommandLine
)

// Source is where a value came from. File and Line are set for FromFile.
type Source struct {
	Kind SourceKind
	File string
	Line int
}

// String returns the text ompi_info prints in its source field: "default",
// "environment", "command line" or "file (<path>:<line>)".
func (s Source) String() string {
	switch s.Kind {
	case FromDefault:
		return "default"
	case FromFile:
		return fmt.Sprintf("file (%s:%d)", s.File, s.Line)
	case FromEnvironment:
		return "environment"
	case FromCommandLine:
		return "command line"
	}
	return fmt.Sprintf("SourceKind(%d)", uint8(s.Kind))
}
