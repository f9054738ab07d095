// Command ompi_info lists gompi's frameworks, components and MCA parameters.
//
//	ompi_info                              package, versions, one line per component
//	ompi_info --param <fw|all> <comp|all>  those components and their parameters
//	ompi_info --all                        everything, every level
//
// Options: --level N (1–9, default 1; --all implies 9), --parsable (Open
// MPI's colon-separated form), --json (the same facts as one JSON document,
// see docs/ompi_info.md), --mca name value (applied, unlike Open MPI's
// ompi_info, which ignores it).
package main

import (
	"os"

	"github.com/gompi/gompi/mca"
	// Every gompi program links package mpi, which links the built-in
	// components: ompi_info links it too, so that the parameters registered
	// by mpi itself (mpi_comm_create_group_algorithm) are listed with the rest.
	_ "github.com/gompi/gompi/mpi"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr, mca.Default()))
}
