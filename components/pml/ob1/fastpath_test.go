package ob1

import "testing"

// TestFastPathTurns: the receive fast path polls the path a peer's last
// message took on every turn, and the other often enough that a message on
// it waits at most fastOtherPathEvery turns, and on its last turn; a peer
// with one path has it polled every turn.
func TestFastPathTurns(t *testing.T) {
	for _, c := range []struct{ llp, btl, viaBTL bool }{
		{true, true, false}, {true, true, true}, {true, false, false}, {false, true, false}, {true, false, true}, {false, true, true},
	} {
		sinceLLP, sinceBTL := 0, 0
		for i := 1; i <= 4*fastOtherPathEvery; i++ {
			l, b := fastPathTurn(c.llp, c.btl, c.viaBTL, i, false)
			if l && !c.llp || b && !c.btl {
				t.Fatalf("%+v turn %d polls a path the peer does not have (llp %v btl %v)", c, i, l, b)
			}
			if sinceLLP, sinceBTL = sinceLLP+1, sinceBTL+1; l {
				sinceLLP = 0
			}
			if b {
				sinceBTL = 0
			}
			if c.llp && sinceLLP >= fastOtherPathEvery || c.btl && sinceBTL >= fastOtherPathEvery {
				t.Fatalf("%+v: turn %d, %d turns without the LLP, %d without the BTL: want each at least every %d", c, i, sinceLLP, sinceBTL, fastOtherPathEvery)
			}
			// The path the last message took: every turn.
			if c.llp && c.btl && (c.viaBTL && !b || !c.viaBTL && !l) {
				t.Fatalf("%+v turn %d skips the path the last message took (llp %v btl %v)", c, i, l, b)
			}
			if c.llp && c.btl && i%fastOtherPathEvery != 0 && l && b {
				t.Fatalf("%+v turn %d polls both: the other path only every %d turns", c, i, fastOtherPathEvery)
			}
		}
		// The last turn (the only one where ranks share cores) looks at
		// every path the peer has.
		if l, b := fastPathTurn(c.llp, c.btl, c.viaBTL, 1, true); l != c.llp || b != c.btl {
			t.Fatalf("%+v: the last turn polls llp %v btl %v, want every path the peer has", c, l, b)
		}
	}
}

// TestLLPPolled: Progress polls the LLPs on every pass whose BTLs delivered
// nothing, and once in llpPollEvery passes that did (a window of messages
// keeps the BTLs busy: an LLP message then waits that many passes at most).
func TestLLPPolled(t *testing.T) {
	since := 0
	for turn := uint64(1); turn <= 5*llpPollEvery; turn++ {
		if !llpPolled(0, turn) {
			t.Fatalf("pass %d delivered nothing and skipped the LLPs", turn)
		}
		polled := llpPolled(3, turn)
		if since++; polled {
			since = 0
		}
		if since >= llpPollEvery {
			t.Fatalf("pass %d: %d busy passes without polling the LLPs, want at most %d", turn, since, llpPollEvery-1)
		}
		if polled && turn%llpPollEvery != 0 {
			t.Fatalf("busy pass %d polled the LLPs: want only every %d-th", turn, llpPollEvery)
		}
	}
}
