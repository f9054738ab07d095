// Command ring passes a token around every rank: rank 0 starts it, each rank
// receives it from its left neighbour, adds one and passes it to its right
// neighbour, and rank 0 receives it back after it went all the way round.
//
//	go run ./cmd/mpirun -np 4 ./examples/ring
//	go run ./examples/ring               # a singleton passes the token to itself
package main

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/mpi"
)

const tag = 1

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
	if err := ring(inst.CommWorld()); err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		inst.Abort(1)
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
}

func ring(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	left, right := (me+n-1)%n, (me+1)%n
	token := []int64{0}
	if me == 0 {
		// Rank 0 starts the token, then waits for it to come back.
		if err := mpi.Send(c, token, right, tag); err != nil {
			return err
		}
	}
	st, err := mpi.Recv(c, token, left, tag)
	if err != nil {
		return err
	}
	fmt.Printf("rank %d received the token (value %d) from rank %d\n", me, token[0], st.Source)
	if me == 0 {
		fmt.Printf("token went around %d ranks\n", n)
		return nil
	}
	token[0]++
	return mpi.Send(c, token, right, tag)
}
