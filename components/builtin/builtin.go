// Package builtin registers gompi's own frameworks and components. Importing
// it (package mpi and the tools do) makes the whole in-tree catalogue
// available; each component package stays free of init-time side effects.
package builtin

import (
	// The frameworks register themselves.
	btlself "github.com/gompi/gompi/components/btl/self"
	btlshm "github.com/gompi/gompi/components/btl/shm"
	btltcp "github.com/gompi/gompi/components/btl/tcp"
	collbasic "github.com/gompi/gompi/components/coll/basic"
	collhan "github.com/gompi/gompi/components/coll/han"
	collnbc "github.com/gompi/gompi/components/coll/nbc"
	collself "github.com/gompi/gompi/components/coll/self"
	collsm "github.com/gompi/gompi/components/coll/sm"
	colltofu "github.com/gompi/gompi/components/coll/tofu"
	colltuned "github.com/gompi/gompi/components/coll/tuned"
	groupdense "github.com/gompi/gompi/components/group/dense"
	groupsparse "github.com/gompi/gompi/components/group/sparse"
	llptofu "github.com/gompi/gompi/components/llp/tofu"
	pmlob1 "github.com/gompi/gompi/components/pml/ob1"
	_ "github.com/gompi/gompi/frameworks/btl"
	_ "github.com/gompi/gompi/frameworks/coll"
	_ "github.com/gompi/gompi/frameworks/group"
	_ "github.com/gompi/gompi/frameworks/llp"
	_ "github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
)

func init() {
	mca.RegisterBuiltin(
		&btlself.Component{},
		&btlshm.Component{},
		&btltcp.Component{},
		&collbasic.Component{},
		&collhan.Component{},
		&collnbc.Component{},
		&collself.Component{},
		&collsm.Component{},
		&colltofu.Component{},
		&colltuned.Component{},
		&groupdense.Component{},
		&groupsparse.Component{},
		&llptofu.Component{},
		&pmlob1.Component{},
	)
}
