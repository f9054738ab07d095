package rte

import "time"

// SetModexHandshakeTimeout changes the modex node socket's handshake
// timeout until the returned function restores it.
func SetModexHandshakeTimeout(d time.Duration) (restore func()) {
	old := modexHandshakeTimeout
	modexHandshakeTimeout = d
	return func() { modexHandshakeTimeout = old }
}

// NextFenceSocket is the name of the node socket of m's next fence.
func NextFenceSocket(m *Modex) string {
	m.mu.Lock()
	seq := m.fences
	m.mu.Unlock()
	return m.socketName(seq)
}
