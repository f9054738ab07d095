// Package params is gompi's MCA parameter system: typed parameters declared
// once, and their values resolved per instance from explicit sources.
//
// A component declares its parameters (name, type, default, help, level,
// scope, enumerated values, deprecated synonyms) in a Registry. The registry is
// filled while the program initialises and frozen afterwards; it holds no
// values. Values live in a Values, made by Resolve from a Sources: an
// environment snapshot, a command-line list, and the parameter files that the
// snapshot and the command line name. Nothing here reads os.Environ or any
// other global, so two instances in one process (goroutine ranks in a test)
// may see different values.
//
// Sources, lowest precedence first:
//
//	default < parameter files < environment OMPI_MCA_<name> < command line
//
// Parameter files are listed by mca_base_param_files (comma list, settable
// only from the environment or the command line); the leftmost file that sets
// a name wins. The default list is the user file ~/.gompi/mca-params.toml,
// then the system file $GOMPI_SYSCONFDIR/mca-params.toml (/etc/gompi when the
// variable is unset). A ".toml" file is TOML with full parameter names as keys
// (nested tables are accepted where they do not collide with a flat key); a
// ".conf" file is the classic "name = value" form.
//
// Every value remembers where it came from (Source): "default",
// "environment", "command line" or "file (<path>:<line>)". A launcher that
// forwards command-line settings through the environment marks them with
// OMPI_MCA_SOURCE_<name>=command line, and they keep that source.
//
// Resolution is strict: a value that does not parse is an error that names the
// parameter, the value, the source and what is accepted; a name that no
// registered parameter has is reported with the closest registered names.
package params
