// Command hello prints one line per rank: its rank, the job size and its
// node.
//
//	go run ./cmd/mpirun -np 4 ./examples/hello
//	go run ./examples/hello            # a singleton: rank 0 of 1
package main

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/mpi"
)

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	fmt.Printf("hello from rank %d of %d on %s\n", inst.Rank(), inst.Size(), inst.Node())
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}
