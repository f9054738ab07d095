//go:build !gompi_noplugins

package builtin

// Coll plugins: go-plugin binaries found on mca_base_component_path. The
// host side speaks their wire itself (mca/plugin), so this links no gRPC;
// build with -tags gompi_noplugins to leave it out all the same, and a
// component path then is an error that says so.
import _ "github.com/gompi/gompi/frameworks/coll/collhost"
