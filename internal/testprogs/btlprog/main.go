// Command btlprog exercises the byte transfer layer between real processes,
// for the BTL tests.
//
//	btlprog sweep MAXBYTES     ranks 0 and 1 exchange every size up to MAXBYTES (btltest.Sweep)
//	btlprog routes             print, per peer, the BTL that carries its traffic
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/mpi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "btlprog: no mode")
		os.Exit(2)
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "btlprog:", err)
		os.Exit(1)
	}
	rank := inst.Rank()
	switch os.Args[1] {
	case "sweep":
		max, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "btlprog: bad size", os.Args[2])
			os.Exit(2)
		}
		h := btltest.New(inst.BML(), rank, btl.TagUser)
		if err := inst.Runtime().Barrier(); err != nil {
			fmt.Fprintln(os.Stderr, "btlprog:", err)
			os.Exit(1)
		}
		if rank < 2 && inst.Size() >= 2 {
			peer := 1 - rank
			if err := h.Sweep(peer, btltest.Sizes(max), 2*time.Minute); err != nil {
				fmt.Fprintln(os.Stderr, "btlprog:", err)
				os.Exit(1)
			}
			fmt.Printf("btl ok rank %d via %s: %+v\n", rank, inst.BML().Peer(peer).Send[0].Attr.Name, h.Stats)
		}
	case "routes":
		for p := 0; p < inst.Size(); p++ {
			fmt.Printf("rank %d to %d: %s\n", rank, p, inst.BML().Peer(p).Send[0].Attr.Name)
		}
	default:
		fmt.Fprintln(os.Stderr, "btlprog: unknown mode", os.Args[1])
		os.Exit(2)
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "btlprog:", err)
		os.Exit(1)
	}
}
