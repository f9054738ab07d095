package collplugin_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/collplugin"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// dissemination writes rank's part of a barrier on size ranks: in round k
// every rank sends to rank+2^k and receives from rank-2^k. A plugin's
// Schedule answers with data, not code: the host validates it, caches it
// per communicator and runs it natively.
func dissemination(op coll.Op, size, rank int, values map[string]string) (*schedule.Schedule, error) {
	if on, err := params.ParseBool(values["coll_plugbarrier_enable"]); err != nil || !on || size < 2 {
		return nil, err // nil, nil: declined, the barrier falls through
	}
	s := &schedule.Schedule{Op: op, Size: size, Rank: rank, Parts: 1}
	for k := 1; k < size; k <<= 1 {
		s.Rounds = append(s.Rounds, []schedule.Step{
			{Kind: schedule.Send, Peer: (rank + k) % size},
			{Kind: schedule.Recv, Peer: (rank - k + size) % size},
		})
	}
	return s, nil
}

var guest = collplugin.Guest{
	Name:     "plugbarrier", // the executable is gompi-coll-plugbarrier
	Version:  mca.Version{Major: 1},
	Priority: 50, // above tuned (30): its barrier wins
	Params: []params.Def{{
		Name: "coll_plugbarrier_enable", Type: params.Bool, Default: "true", Level: 3,
		Help: "Whether plugbarrier fills the barrier",
	}},
	Ops:      []coll.Op{coll.Barrier},
	Schedule: dissemination,
}

// A coll plugin's main is one call: Serve runs the plugin's side of the
// go-plugin handshake and answers the host until it is stopped. Build it
// as gompi-coll-<Name> into a directory on mca_base_component_path:
//
//	go build -o ~/.gompi/plugins/gompi-coll-plugbarrier .
//	mpirun -np 4 --mca mca_base_component_path ~/.gompi/plugins ./prog
//
// It has no output to check: Serve runs only when gompi starts the
// executable (examples/outoftree/plugin is a whole one, and its test runs it).
func ExampleServe() {
	collplugin.Serve(guest)
}

// What the host does with a Guest's answer, without a plugin process: it
// asks Schedule for each rank's part, validates it (a schedule that sends
// to a rank outside the communicator, or whose sends and receives do not
// pair, is refused) and runs it natively. Here colltest's in-memory ranks
// stand for a communicator of five.
func ExampleGuest() {
	const size = 5
	values := map[string]string{"coll_plugbarrier_enable": "true"} // as the host resolves them
	scheds := make([]*schedule.Schedule, size)
	for rank := range scheds {
		s, err := guest.Schedule(coll.Barrier, size, rank, values)
		if err != nil {
			log.Fatal(err)
		}
		if err := s.Validate(coll.Barrier, size, rank); err != nil {
			log.Fatal(err)
		}
		scheds[rank] = s
	}
	for k, round := range scheds[0].Rounds {
		fmt.Printf("rank 0, round %d:", k)
		for _, st := range round {
			fmt.Printf(" %s %d", st.Kind, st.Peer)
		}
		fmt.Println()
	}

	w := colltest.NewWorld(size, false)
	err := w.Run(func(c coll.Comm) error {
		return schedule.Run(c, &coll.Args{}, scheds[c.Rank()])
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rounds", w.Rounds(), "messages per rank", w.Sent())

	off, err := guest.Schedule(coll.Barrier, size, 0, map[string]string{"coll_plugbarrier_enable": "false"})
	fmt.Println("disabled: declined", off == nil && err == nil)
	// Output:
	// rank 0, round 0: send 1 recv 4
	// rank 0, round 1: send 2 recv 3
	// rank 0, round 2: send 4 recv 1
	// rounds 3 messages per rank [3 3 3 3 3]
	// disabled: declined true
}
