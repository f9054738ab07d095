package tcp

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Loopback reaches a peer if and only if both processes share a network
// namespace on one machine: the launcher's node is only a proxy for that.
// Two goroutine ranks of one test on different fake nodes share one
// (loopback works between them, and may be all a container has); two
// simulated hosts on one machine (test/netns) have one each (the peer's
// 127.0.0.1 is not ours). So a module publishes, with its addresses, which
// namespace it is in, and a peer uses loopback when the namespaces are
// equal, or, when either side could not tell, when the launcher says the
// node is the same (the rule before namespaces were published).

// netNS names a network namespace on one boot of one machine: the kernel's
// boot id, random at every boot, and the namespace's inode number, unique
// among the live namespaces of that kernel. The zero value is unknown.
type netNS struct {
	boot  [16]byte
	inode uint64
}

// netNSLen is the size of a netNS in a business card.
const netNSLen = 16 + 8

func (n netNS) known() bool { return n != netNS{} }

func (n netNS) String() string {
	if !n.known() {
		return "unknown"
	}
	return fmt.Sprintf("boot %x netns %d", n.boot[:4], n.inode)
}

func (n netNS) append(b []byte) []byte {
	b = append(b, n.boot[:]...)
	return binary.BigEndian.AppendUint64(b, n.inode)
}

func netNSFrom(b []byte) netNS {
	var n netNS
	copy(n.boot[:], b[:16])
	n.inode = binary.BigEndian.Uint64(b[16:netNSLen])
	return n
}

// Where the kernel tells this process's identity.
const (
	bootIDFile = "/proc/sys/kernel/random/boot_id"
	netNSFile  = "/proc/self/ns/net"
)

// thisNetNS reads this process's network namespace; unknown, with the
// reason, when the kernel does not tell (no /proc, another system).
func thisNetNS() (netNS, error) {
	raw, err := os.ReadFile(bootIDFile)
	if err != nil {
		return netNS{}, err
	}
	boot, err := parseBootID(string(raw))
	if err != nil {
		return netNS{}, fmt.Errorf("%s: %w", bootIDFile, err)
	}
	fi, err := os.Stat(netNSFile)
	if err != nil {
		return netNS{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == 0 {
		return netNS{}, fmt.Errorf("%s: no inode number", netNSFile)
	}
	return netNS{boot: boot, inode: st.Ino}, nil
}

// parseBootID reads the kernel's boot id, a UUID in text
// ("56c268de-8aeb-49bb-98e4-5c623a369735\n").
func parseBootID(s string) ([16]byte, error) {
	var id [16]byte
	s = strings.TrimSpace(s)
	h := strings.ReplaceAll(s, "-", "")
	if len(s) != 36 || len(h) != 32 {
		return id, fmt.Errorf("boot id %q is not a UUID", s)
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("boot id %q is not a UUID", s)
	}
	if id == [16]byte{} {
		return id, fmt.Errorf("boot id %q is zero", s)
	}
	return id, nil
}

// loopbackReaches says whether this process's loopback reaches a peer's:
// when both namespaces are known, if they are one; otherwise if the
// launcher placed the peer on this node. why says which rule decided, for
// the log.
func loopbackReaches(sameNode bool, mine, peer netNS) (ok bool, why string) {
	if mine.known() && peer.known() {
		if mine == peer {
			return true, "same network namespace"
		}
		return false, "another network namespace"
	}
	if sameNode {
		return true, "same node (network namespace unknown)"
	}
	return false, "another node (network namespace unknown)"
}
