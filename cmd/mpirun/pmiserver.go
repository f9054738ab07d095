package main

// The PMI server: the job's id and secret, the key-value space the ranks
// share, and what mpirun learns from the ranks' PMI conversations.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// startServer makes the job's PMI server, and its TCP listener when ranks
// run on other hosts. It comes before the ranks start: their environment
// carries the job's id it chooses and its listener's port, remote ranks are
// given its secret, and every local rank is served from its start.
func (j *job) startServer() error {
	var idb [4]byte
	rand.Read(idb[:])
	var cookie [rte.CookieLen]byte
	rand.Read(cookie[:])
	j.jobID = hex.EncodeToString(idb[:])
	if j.remote() {
		var secret [16]byte
		rand.Read(secret[:])
		j.auth = hex.EncodeToString(secret[:])
	}
	j.srv = pmi.NewServer(pmi.ServerConfig{
		KVSName: rte.KVSPrefix + j.jobID,
		Size:    j.o.np,
		Preput: map[string]string{
			rte.CookieKey:         hex.EncodeToString(cookie[:]),
			rte.ProcessMappingKey: rte.FormatMapping(j.hostOf),
		},
		Auth: j.auth,
		Events: pmi.Events{
			Init:     func(r int) { j.mu.Lock(); j.ranks[r].initialized = true; j.mu.Unlock() },
			Finalize: func(r int) { j.mu.Lock(); j.ranks[r].finalized = true; j.mu.Unlock() },
			Abort: func(r, code int, msg string) {
				ev := event{kind: "abort", rank: r, code: code, msg: msg, at: j.tick()}
				j.mu.Lock()
				j.ranks[r].abort = &ev
				j.mu.Unlock()
				j.events <- ev
			},
			PeerLost: j.peerLost,
			Ended: func(r int) {
				j.mu.Lock()
				rs := j.ranks[r]
				j.mu.Unlock()
				rs.servedOnce.Do(func() { close(rs.served) })
			},
			Error: func(r int, err error) { j.events <- event{kind: "pmi-error", rank: r, msg: err.Error()} },
			Put: func(r int, key, value string, n int) {
				if !j.o.reportModex || !strings.HasPrefix(key, "m") {
					return
				}
				j.modexMu.Lock()
				j.modexPuts[key] = value
				j.modexLineBytes[key] = int64(n)
				j.modexMu.Unlock()
			},
		},
	})
	if !j.remote() {
		return nil
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return fmt.Errorf("listening for remote ranks' PMI connections: %w", err)
	}
	// Remote ranks reach mpirun by its host name, as Hydra's proxies do.
	j.pmiPort = net.JoinHostPort(j.host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	go j.srv.ServeListener(ln, pmi.ListenConfig{})
	return nil
}
