// Package tofu is gompi's low-latency path (LLP), after the "tofu LLP" of
// Fujitsu's K computer MPI: a small blocking send between two processes of
// one node goes straight into a message slot that the receiver polls, with
// no request object, no BTL and no queue. When it cannot go at once, Send
// returns llp.ErrNotAvailable and ob1 sends the message through the BTLs.
//
// # Slots
//
// Per ordered pair of local processes there is one box: a short array of
// fixed-size slots (llp_tofu_slots of llp_tofu_slot_size bytes, whole cache
// lines) used round robin, each published by a stamp word that names its
// message (slots.go). A message of 8 bytes with ob1's 16-byte header and the
// slot's own 16 bytes is one cache line: the sender writes it, the receiver
// reads it, and nothing else is shared. Send refuses at once, writing
// nothing, when the message does not fit a slot, every slot holds a message
// the receiver has not taken, another goroutine is sending to the same peer,
// the box cannot be made, or the peer has finalized; it never waits.
//
// # Segments and their lifetime (package shmem's, as btl shm's)
//
// Segments are memfds by default (shmem_backing): peers open them through
// /proc/<maker pid>/fd, and a crash, at any moment, leaves nothing. With
// named files (the fallback), every file is named gompi-<jobid>-tofu-…, so
// that the cleanup launchers run at job end (shmem.RemoveJobFiles) and the
// next job's sweep remove it; it is made with O_EXCL and mode 0600, and
// removed as soon as both sides have mapped it. Below, "removes the file"
// is, for a memfd, "its maker closes its descriptor".
//
//   - A control segment per process (gompi-<jobid>-tofu-ctl-<rank>), made at
//     Query and announced by a business card in the modex, mapped by each
//     local peer in AddProcs after Init's fence; the last peer to map it
//     removes the file. It holds a doorbell, a "finalized" word, and one
//     announce word per local rank.
//   - A box per ordered pair (gompi-<jobid>-tofu-<src>-<dst>), made by its
//     sender on the first Send to that peer (memory grows with the pairs
//     that talk, not with the square of the local ranks). The sender writes
//     the box's geometry into its announce word in the receiver's control
//     segment, rings the doorbell, and writes the message at once: the first
//     Send is a hit too. The receiver, which loads its doorbell on every
//     Progress, maps the box and removes the file.
//
// # Progress
//
// Progress loads the doorbell and the next stamp of each box it has mapped,
// and takes its lock only when a stamp says a message is there: an idle
// Progress costs one load per active peer and no atomic read-modify-write,
// since ob1 calls it on every progress pass.
//
// A sender loads the receiver's sleep word after publishing a message and
// rings its bell when a goroutine of it sleeps (package rte's Bell; the
// control segment's sleep word is the receiver's watcher).
//
// A peer that dies stops taking messages: its slots fill and Send refuses,
// so the BTL path, which watches peers, reports the loss.
package tofu

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Component is the tofu LLP component.
type Component struct {
	slots, slotSize *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "llp", Name: "tofu", Version: mca.GompiVersion, API: llp.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {
	c.slots = r.Add(params.Def{Name: "llp_tofu_slots", Type: params.Uint, Level: 5, Default: "16",
		Help: "Message slots from one process to another on the node (a power of two from 1 to 1024): how many small " +
			"blocking sends may wait for the receiver before further ones take the BTLs"})
	// 576: a 512-byte payload fits (with the two 16-byte headers); the LLP
	// beats the shm ring up to about 1 KiB (measured in the near
	// placement), and slots cost memory per pair that talks.
	c.slotSize = r.Add(params.Def{Name: "llp_tofu_slot_size", Type: params.Size, Level: 5, Default: "576",
		Help: "Bytes per slot, a multiple of 64 from 64 to 64k: a message fits when ob1's 16-byte header, its payload and the " +
			"slot's 16-byte header do (payloads up to slot_size - 32 bytes); set pml_ob1_llp_max_payload_size to match"})
}

// config reads and checks the parameters.
func (c *Component) config(b *mca.Base) (geometry, error) {
	n, size := b.Get(c.slots).Uint(), b.Get(c.slotSize).Uint()
	if n < minSlots || n > maxSlots || n&(n-1) != 0 {
		return geometry{}, mpierr.Errorf(mpierr.ErrUnsupportedParam, "llp_tofu_slots = %d: accepted: a power of two from %d to %d", n, minSlots, maxSlots)
	}
	if size < minSlotSize || size > maxSlotSize || size%cacheLine != 0 {
		return geometry{}, mpierr.Errorf(mpierr.ErrUnsupportedParam, "llp_tofu_slot_size = %d: accepted: a multiple of %d from %d to %d (64 to 64k)",
			size, cacheLine, minSlotSize, maxSlotSize)
	}
	return geometry{slots: int(n), slotSize: int(size)}, nil
}

// Query makes the module: it makes this process's control segment and
// publishes the card that tells local peers to map it. It declines when no
// other process of the job shares the node.
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (llp.Module, error) {
	job := rt.Job()
	log := b.Logger("llp").Named("tofu")
	// Bad values are errors even where the component would decline.
	geo, err := c.config(b)
	if err != nil {
		return nil, err
	}
	if job.LocalSize < 2 {
		return nil, mca.Decline("no other process of the job on node %s", job.Node)
	}
	if err := shmem.AllowedBy(b, "tofu"); err != nil {
		return nil, err
	}
	if err := shmem.Usable(job.ID); err != nil {
		return nil, err
	}
	m := &module{
		log: log, geo: geo, capacity: geo.slotSize - slotHeader, modex: rt.Modex(), wake: rt.Bell(),
		job: job.ID, rank: job.Rank, pid: os.Getpid(),
		localRanks: job.LocalRanks(job.NodeIndex),
		peers:      make([]*peer, job.Size),
	}
	m.owner = owner
	m.owner.Maps = shmem.MapsFor(rt)
	m.owner.Held = &shmem.Held{}
	if m.owner.Backing, err = shmem.ChooseBacking(b, log); err != nil {
		return nil, err
	}
	if err := m.owner.CheckRoom(len(m.localRanks), uint64(boxSize(geo)), fmt.Sprintf("%d slots of %d bytes", geo.slots, geo.slotSize)); err != nil {
		return nil, err
	}
	for i, r := range m.localRanks {
		if r == job.Rank {
			m.localIdx = i
		}
	}
	m.local = make([]*peer, len(m.localRanks))
	m.in = make([]*inbox, len(m.localRanks))
	if m.ctl, err = m.owner.CreateCtl(job.ID, shmem.CtlHeader{Rank: job.Rank, Pid: m.pid, LocalSize: len(m.localRanks)}); err != nil {
		return nil, err
	}
	if err := owner.PublishCard(rt.Modex(), m.pid, m.ctl); err != nil {
		return nil, err
	}
	// While a goroutine of ours sleeps, peers that write a slot ring.
	rt.Bell().Watch(m.ctl)
	log.Log(mca.VerboseComponent, "low-latency path ready", "local_ranks", len(m.localRanks), "slots", geo.slots,
		"slot_bytes", geo.slotSize, "max_message", m.capacity, "control_segment", m.ctl.Name)
	return m, nil
}
