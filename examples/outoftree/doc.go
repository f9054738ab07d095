// Package outoftree holds the out-of-tree component examples, each a Go
// module of its own (a replace points it at this repository); its test
// builds them as a user would and runs them under mpirun.
//
// Start with linked, a program with a coll component of its own linked in
// (mca.Register from init), then plugin, a coll component in an executable
// of its own (collplugin.Serve). docs/components.md explains both; the
// package has no API.
package outoftree
