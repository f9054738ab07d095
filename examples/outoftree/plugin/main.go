// Command gompi-coll-plugbarrier is a coll component in a process of its
// own: a go-plugin binary that gompi starts when it finds it on
// mca_base_component_path. It fills the barrier only, with a dissemination
// schedule that gompi validates, caches per communicator and runs natively;
// every other operation falls through to gompi's components.
//
//	go build -o ~/.gompi/plugins/gompi-coll-plugbarrier .
//	mpirun -np 4 --mca mca_base_component_path ~/.gompi/plugins --mca coll_base_verbose 10 ./prog
//
// Its parameter coll_plugbarrier_enable (default true) is registered in the
// host: `ompi_info --mca mca_base_component_path … --param coll plugbarrier`
// shows it, and `--mca coll_plugbarrier_enable 0` makes it fill nothing.
package main

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/collplugin"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

func main() {
	collplugin.Serve(collplugin.Guest{
		Name:     "plugbarrier",
		Version:  mca.Version{Major: 1},
		Priority: 50, // above tuned (30), so that its barrier wins
		Params: []params.Def{{
			Name: "coll_plugbarrier_enable", Type: params.Bool, Default: "true", Level: 3,
			Help: "Whether plugbarrier fills the barrier; false leaves it to the other components",
		}},
		Ops:      []coll.Op{coll.Barrier},
		Schedule: barrier,
	})
}

// barrier is the dissemination barrier: in round k every rank sends to
// rank+2^k and receives from rank-2^k, ⌈log2 n⌉ rounds in all.
func barrier(op coll.Op, size, rank int, values map[string]string) (*schedule.Schedule, error) {
	if on, err := params.ParseBool(values["coll_plugbarrier_enable"]); err != nil || !on || size < 2 {
		return nil, err // declined: the barrier falls through
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
