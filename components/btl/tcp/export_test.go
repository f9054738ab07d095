package tcp

import (
	"net/netip"

	"github.com/gompi/gompi/frameworks/btl"
)

// Hooks for the external tests.

// CardKey is the modex key of the business card.
const CardKey = cardKey

// ParseCard decodes a business card.
func ParseCard(b []byte) ([]netip.AddrPort, error) {
	c, err := parseCard(b)
	return c.addrs, err
}

// Hello builds a hello as a dialer would send it.
func Hello(job string, cookie [16]byte, from, to, maxFrame int) []byte {
	h := hello{kind: kindHello, job: jobTag(job), cookie: cookie, from: uint32(from), to: uint32(to), maxFrame: uint32(maxFrame)}
	return h.encode()
}

// HelloLen is the size of a hello.
const HelloLen = helloLen

// Frame builds a frame header.
func FrameHeader(tag uint8, length int) []byte {
	b := make([]byte, frameHdrLen)
	putFrameHeader(b, frameData, tag, length)
	return b
}

// Rejected counts the connections a module refused at the handshake.
func Rejected(m btl.Module) int64 { return m.(*module).rejected.Load() }

// Deferred counts the peers' connections a module declined because it
// dialled the peer too (the pair keeps that one).
func Deferred(m btl.Module) int64 { return m.(*module).deferred.Load() }

// IsDeferral says whether an answer to a hello is a deferral.
func IsDeferral(b []byte) bool { return len(b) == helloLen && b[6] == kindDefer }

// Stats are a module's frame counts.
func Stats(m btl.Module) (sent, received uint64) {
	mod := m.(*module)
	if p := mod.eps.Load(); p != nil {
		for _, e := range *p {
			if e != nil {
				sent += e.frames.Load()
			}
		}
	}
	mod.progress.Lock()
	received = mod.received
	mod.progress.Unlock()
	return sent, received
}

// Crash closes every socket of a module at once, without goodbyes, as the
// death of its process would.
func Crash(m btl.Module) { m.(*module).shutdown(false) }

// Handshakes returns a module's pending handshakes now, the most at once,
// and how many were closed to make room.
func Handshakes(m btl.Module) (pending, peak int, evicted int64) {
	return m.(*module).handshakes.Stats()
}

// Placed counts the payloads the module read straight into their place.
func Placed(m btl.Module) uint64 {
	mod := m.(*module)
	mod.progress.Lock()
	defer mod.progress.Unlock()
	return mod.placed
}
