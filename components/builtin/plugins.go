//go:build !gompi_noplugins

package builtin

// Coll plugins: go-plugin binaries found on mca_base_component_path. They
// bring gRPC into every program (about 15 MB and a few milliseconds of
// start-up); build with -tags gompi_noplugins to leave them out, and a
// component path then is an error that says so.
import _ "github.com/gompi/gompi/frameworks/coll/collplugin"
