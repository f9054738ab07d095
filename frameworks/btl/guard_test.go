package btl

import (
	"testing"
	"time"
)

func TestGuardWithdrawWaitsForTheWriter(t *testing.T) {
	var g Guard
	if !g.Enter() {
		t.Fatal("a fresh guard refused a writer")
	}
	withdrawn := make(chan struct{})
	go func() {
		g.Withdraw()
		close(withdrawn)
	}()
	select {
	case <-withdrawn:
		t.Fatal("Withdraw returned while a writer was inside")
	case <-time.After(20 * time.Millisecond):
	}
	g.Exit()
	<-withdrawn
	if g.Enter() {
		t.Fatal("Enter let a writer in after Withdraw")
	}
	if !g.Withdrawn() {
		t.Fatal("Withdrawn is false after Withdraw")
	}
}
