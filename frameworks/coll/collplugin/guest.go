// Package collplugin is the SDK of coll plugins: Serve, which a coll
// plugin's main calls. It links go-plugin and gRPC, so gompi programs do
// not import it; their side of a plugin is package collhost, which
// components/builtin imports.
//
// Start with Guest: name the plugin, list the operations it may fill and
// write Schedule, which answers with a schedule (package schedule: rounds of
// send, receive, reduce and copy steps) that the host validates and runs
// natively; main calls Serve with it. Build the executable as
// gompi-coll-<Name> into a directory on mca_base_component_path. ExampleGuest
// shows what the host does with a schedule; examples/outoftree/plugin is a
// whole plugin, and docs/components.md and docs/plugin-wire.md describe the
// rest.
package collplugin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/collhost"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin/sdk"
	"github.com/gompi/gompi/params"
)

// Guest is a coll plugin: its name, version and parameters, the operations
// it may fill, and the function that writes their schedules.
type Guest struct {
	// Name is the component's name; the executable must be called
	// gompi-coll-<Name>.
	Name     string
	Version  mca.Version
	Priority int
	// Params are the component's parameters, named coll_<Name>_…; their
	// values reach Schedule.
	Params []params.Def
	// Ops are the operations the plugin may fill; the others fall through
	// to other components. Only those that schedule.Fillable accepts take
	// schedules: the host refuses an answer with one for another (a bcast,
	// a gatherv: their calls differ by root or counts, which a schedule
	// does not know).
	Ops []coll.Op
	// Schedule writes rank's part of op on a communicator of size ranks.
	// Returning nil and no error leaves op to other components on that
	// communicator.
	Schedule func(op coll.Op, size, rank int, values map[string]string) (*schedule.Schedule, error)
}

// Serve runs the coll plugin; call it from main. It does not return.
func Serve(g Guest) {
	sdk.Serve(sdk.Guest{
		Info:   mca.Info{Framework: "coll", Name: g.Name, Version: g.Version, API: coll.Framework.API, Priority: g.Priority},
		Params: g.Params,
		Query: func(_ context.Context, values map[string]string, in []byte) ([]byte, error) {
			return g.answer(values, in)
		},
	})
}

func (g Guest) answer(values map[string]string, in []byte) ([]byte, error) {
	var req collhost.Request
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, fmt.Errorf("coll query: %w", err)
	}
	r := collhost.Reply{Schedules: map[string][]byte{}}
	for _, op := range g.Ops {
		s, err := g.Schedule(op, req.Size, req.Rank, values)
		if err != nil {
			return nil, fmt.Errorf("%s on %d ranks: %w", op, req.Size, err)
		}
		if s != nil {
			r.Schedules[op.String()] = s.Encode()
		}
	}
	if len(r.Schedules) == 0 {
		r.Declined = fmt.Sprintf("no schedule for %d ranks", req.Size)
	}
	return json.Marshal(r)
}
