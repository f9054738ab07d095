package plugin

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The host's side of gRPC: an HTTP/2 client connection with prior
// knowledge (plaintext, as go-plugin serves it) that makes unary calls and
// reads one server stream (go-plugin's stdio). It is what the host needs of
// grpc-go and no more: gRPC's packages cost a rank milliseconds of
// initialisation at every start and most of its binary, for the rare job
// that names a plugin; its header compression is its own too (hpack.go).
// Every frame, header block and message the plugin sends goes through a
// parser that returns errors (FuzzH2Conn, FuzzHpack, FuzzProtoMessages).

const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingInitialWindow = 0x4
	settingMaxFrameSize  = 0x5
	settingEnablePush    = 0x2
	settingMaxHeaderList = 0x6

	// HTTP/2's defaults (RFC 9113 §6.5.2), which the host keeps for what
	// it receives: an answer larger than the window is paced by the
	// WINDOW_UPDATEs it sends as it reads.
	h2Window   = 65535
	h2MaxFrame = 16384
	h2MaxWin   = 1<<31 - 1
	// maxHeaderBlock bounds one header block from the plugin (a long
	// grpc-message included), so that a plugin cannot exhaust the host.
	maxHeaderBlock = 1 << 20

	h2Cancel = 0x8 // RST_STREAM's CANCEL
)

var clientPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// gRPC status codes the host tells apart.
const (
	grpcOK      = 0
	grpcUnknown = 2
	// What a plugin's gRPC server answers when the call's grpc-timeout
	// passes or the call is cancelled.
	grpcCancelled        = 1
	grpcDeadlineExceeded = 4
)

// rpcError is a call the plugin answered with a non-OK grpc-status.
type rpcError struct {
	code int
	msg  string
}

func (e *rpcError) Error() string { return fmt.Sprintf("grpc-status %d: %s", e.code, e.msg) }

// errCallTimeout is a call that got no answer in time.
var errCallTimeout = errors.New("no answer in time")

// errPluginReset is a call the plugin ended with RST_STREAM.
var errPluginReset = errors.New("the plugin reset the call")

// errStreamEnded stops sending on a stream that has ended: the plugin may
// answer, or reset the call, before it has read all of the request.
var errStreamEnded = errors.New("the call has ended")

type frameHeader struct {
	length uint32
	typ    uint8
	flags  uint8
	stream uint32
}

// readFrame reads one frame, its payload into buf when it fits (a slice of
// buf or a new one is returned), and refuses one longer than max bytes.
func readFrame(r io.Reader, buf []byte, max uint32) (frameHeader, []byte, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frameHeader{}, buf, err
	}
	fh := frameHeader{
		length: uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2]),
		typ:    h[3], flags: h[4],
		stream: binary.BigEndian.Uint32(h[5:]) & h2MaxWin,
	}
	if fh.length > max {
		return fh, buf, fmt.Errorf("a frame of %d bytes, more than the %d allowed", fh.length, max)
	}
	if uint32(cap(buf)) < fh.length {
		buf = make([]byte, fh.length)
	}
	buf = buf[:fh.length]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fh, buf, err
	}
	return fh, buf, nil
}

// unpad strips a PADDED frame's padding.
func unpad(fh frameHeader, p []byte) ([]byte, error) {
	if fh.flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, fmt.Errorf("frame type %d: padding longer than the frame", fh.typ)
	}
	return p[1 : len(p)-int(p[0])], nil
}

// h2conn is one HTTP/2 connection to a plugin.
type h2conn struct {
	nc      net.Conn
	br      *bufio.Reader
	timeout time.Duration // bounds every write, so a plugin that stops reading cannot hang the host

	wmu  sync.Mutex // one frame at a time
	wbuf []byte

	mu        sync.Mutex
	streams   map[uint32]*h2stream
	nextID    uint32
	err       error // why the connection is gone
	goaway    error // the plugin sent GOAWAY: no new streams
	sendWin   int64 // the connection's send window
	peerWin   int64 // the plugin's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame uint32
	kick      chan struct{} // closed, and replaced, when a send window grows or the connection fails

	done chan struct{} // closed when the reader has ended

	// callTimer starts a unary call's timer (time.NewTimer); a test sets it
	// to make the host's timer late.
	callTimer func(time.Duration) *time.Timer
}

// h2stream is one call. Its receive state belongs to the reader until done
// is closed.
type h2stream struct {
	id      uint32
	sendWin int64 // under h2conn.mu

	gotHeaders  bool
	grpcStatus  int // -1 until the trailers say
	grpcMessage string
	buf         []byte             // bytes of messages not yet complete
	msgs        [][]byte           // a unary call's answer
	onMsg       func([]byte) error // a server stream's messages, in order
	err         error              // the stream failed
	done        chan struct{}      // closed when the stream has ended, one way or another
	closeOnce   sync.Once
}

// newH2Conn starts HTTP/2 on nc: the client preface and the host's
// SETTINGS (no server push; the default windows), and a reader.
func newH2Conn(nc net.Conn, timeout time.Duration) (*h2conn, error) {
	c := &h2conn{
		nc: nc, br: bufio.NewReaderSize(nc, 32<<10), timeout: timeout,
		streams: map[uint32]*h2stream{}, nextID: 1,
		sendWin: h2Window, peerWin: h2Window, peerFrame: h2MaxFrame,
		kick: make(chan struct{}), done: make(chan struct{}),
		callTimer: time.NewTimer,
	}
	var settings []byte
	for _, s := range [][2]uint32{{settingEnablePush, 0}, {settingMaxHeaderList, maxHeaderBlock}} {
		settings = binary.BigEndian.AppendUint16(settings, uint16(s[0]))
		settings = binary.BigEndian.AppendUint32(settings, s[1])
	}
	c.wmu.Lock()
	c.wbuf = append(c.wbuf[:0], clientPreface...)
	c.wbuf = appendFrame(c.wbuf, frameSettings, 0, 0, settings)
	err := c.flushLocked()
	c.wmu.Unlock()
	if err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func appendFrame(b []byte, typ, flags uint8, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, stream&h2MaxWin)
	return append(b, payload...)
}

// flushLocked writes wbuf; wmu is held.
func (c *h2conn) flushLocked() error {
	if c.timeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	}
	_, err := c.nc.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	if err != nil {
		err = fmt.Errorf("the connection to the plugin ended: writing: %w", err)
		c.fail(err)
	}
	return err
}

func (c *h2conn) writeFrame(typ, flags uint8, stream uint32, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = appendFrame(c.wbuf, typ, flags, stream, payload)
	return c.flushLocked()
}

func (c *h2conn) windowUpdate(stream, n uint32) error {
	return c.writeFrame(frameWindowUpdate, 0, stream, binary.BigEndian.AppendUint32(nil, n))
}

// fail ends the connection: every open stream fails with err.
func (c *h2conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*h2stream{}
	close(c.kick)
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, s := range streams {
		s.finish(err)
	}
}

// close ends the connection from the host's side.
func (c *h2conn) close() {
	c.fail(errors.New("the connection was closed"))
	<-c.done
}

// finish ends the stream: with err, or, when err is nil, as its trailers
// say.
func (s *h2stream) finish(err error) {
	s.closeOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// forget removes s from the open streams; it reports whether s was open.
func (c *h2conn) forget(s *h2stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams[s.id] != s {
		return false
	}
	delete(c.streams, s.id)
	return true
}

// reset ends s from the host's side, telling the plugin.
func (c *h2conn) reset(s *h2stream, err error) {
	if c.forget(s) {
		_ = c.writeFrame(frameRSTStream, 0, s.id, binary.BigEndian.AppendUint32(nil, h2Cancel))
	}
	s.finish(err)
}

// open starts a call of path with message msg (a gRPC message's bytes),
// sending it whole; onMsg, if set, takes the answer's messages as they
// come (a server stream).
func (c *h2conn) open(path string, msg []byte, timeout time.Duration, onMsg func([]byte) error) (*h2stream, error) {
	s := &h2stream{grpcStatus: -1, onMsg: onMsg, done: make(chan struct{})}
	c.wmu.Lock()
	c.mu.Lock()
	switch {
	case c.err != nil:
		err := c.err
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, err
	case c.goaway != nil:
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, c.goaway
	}
	// Stream ids rise in the order the streams' HEADERS are sent: both
	// under wmu.
	s.id = c.nextID
	c.nextID += 2
	s.sendWin = c.peerWin
	c.streams[s.id] = s
	c.mu.Unlock()
	fields := [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"user-agent", "gompi"},
	}
	if timeout > 0 {
		// The plugin's handler gets the deadline too (grpc-timeout: at
		// most 8 digits).
		fields = append(fields, [2]string{"grpc-timeout", strconv.FormatInt(min(timeout.Milliseconds()+1, 99999999), 10) + "m"})
	}
	var block []byte
	for _, f := range fields {
		block = appendHpackLiteral(block, f[0], f[1])
	}
	// The block in HEADERS and CONTINUATION frames of the plugin's size.
	c.mu.Lock()
	max := int(c.peerFrame)
	c.mu.Unlock()
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), max)
		typ, flags := uint8(frameContinuation), uint8(0)
		if first {
			typ = frameHeaders
		}
		if n == len(block) {
			flags |= flagEndHeaders
		}
		c.wbuf = appendFrame(c.wbuf, typ, flags, s.id, block[:n])
		block = block[n:]
	}
	err := c.flushLocked()
	c.wmu.Unlock()
	if err != nil {
		c.forget(s)
		return nil, err
	}
	deadline := time.Time{}
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := c.send(s, grpcFrame(msg), deadline); err != nil {
		c.reset(s, err)
		return nil, err
	}
	return s, nil
}

// grpcFrame is msg with gRPC's prefix: not compressed, its length.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// send writes b as s's DATA, the last frame ending the stream, within the
// plugin's windows.
func (c *h2conn) send(s *h2stream, b []byte, deadline time.Time) error {
	for first := true; first || len(b) > 0; first = false {
		n, err := c.reserve(s, len(b), deadline)
		if errors.Is(err, errStreamEnded) {
			return nil // its end tells the caller
		}
		if err != nil {
			return err
		}
		flags := uint8(0)
		if n == len(b) {
			flags = flagEndStream
		}
		if err := c.writeFrame(frameData, flags, s.id, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// reserve waits until s may send some of want bytes, and takes them from
// the windows.
func (c *h2conn) reserve(s *h2stream, want int, deadline time.Time) (int, error) {
	var timer <-chan time.Time
	for {
		c.mu.Lock()
		switch {
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return 0, err
		case c.streams[s.id] != s:
			c.mu.Unlock()
			return 0, errStreamEnded
		}
		n := min(int64(want), c.sendWin, s.sendWin, int64(c.peerFrame))
		if want == 0 || n > 0 {
			c.sendWin -= n
			s.sendWin -= n
			c.mu.Unlock()
			return int(n), nil
		}
		kick := c.kick
		c.mu.Unlock()
		if timer == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-kick:
		case <-timer:
			return 0, errCallTimeout
		}
	}
}

// streamErr is why s failed, once done is closed: its own error, or a
// stream the plugin ended without a status.
func (s *h2stream) streamErr() error {
	if s.err != nil {
		return s.err
	}
	if s.grpcStatus != grpcOK {
		return &rpcError{code: s.grpcStatus, msg: s.grpcMessage}
	}
	return nil
}

// gaveUp reports whether err is the plugin ending a call it did not
// answer: a reset, or the status its server gives a call past its deadline.
func gaveUp(err error) bool {
	var rerr *rpcError
	if errors.As(err, &rerr) {
		return rerr.code == grpcDeadlineExceeded || rerr.code == grpcCancelled
	}
	return errors.Is(err, errPluginReset)
}

// unary calls path with msg and returns the answer's one message.
func (c *h2conn) unary(path string, msg []byte, timeout time.Duration) ([]byte, error) {
	begun := time.Now()
	s, err := c.open(path, msg, timeout, nil)
	if err != nil {
		return nil, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := c.callTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-s.done:
	case <-timer:
		c.reset(s, errCallTimeout)
		<-s.done
	}
	if err := s.streamErr(); err != nil {
		// The plugin's server has the deadline too (grpc-timeout) and may
		// give up first, by a reset or a status, when our timer runs late:
		// still a call that got no answer in time.
		if timeout > 0 && time.Since(begun) >= timeout && gaveUp(err) {
			return nil, errCallTimeout
		}
		return nil, err
	}
	if len(s.msgs) != 1 {
		return nil, fmt.Errorf("%d messages in a unary answer", len(s.msgs))
	}
	return s.msgs[0], nil
}

// readLoop reads the plugin's frames until the connection ends.
func (c *h2conn) readLoop() {
	defer close(c.done)
	err := c.readFrames()
	c.fail(fmt.Errorf("the connection to the plugin ended: %w", err))
}

func (c *h2conn) stream(id uint32) *h2stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *h2conn) grow(kickWin func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kickWin()
	if c.err == nil {
		close(c.kick)
		c.kick = make(chan struct{})
	}
}

// readFrames handles the plugin's frames; its error ends the connection.
func (c *h2conn) readFrames() error {
	dec := newHpackDecoder()
	var (
		buf      []byte
		inBlock  bool // a header block awaits CONTINUATION
		blockID  uint32
		blockEnd bool // its HEADERS ended the stream
		block    []byte
	)
	for {
		fh, p, err := readFrame(c.br, buf, h2MaxFrame)
		buf = p
		if err != nil {
			return err
		}
		if inBlock && (fh.typ != frameContinuation || fh.stream != blockID) {
			return fmt.Errorf("frame type %d inside a header block", fh.typ)
		}
		switch fh.typ {
		case frameData:
			if fh.stream == 0 {
				return errors.New("DATA on stream 0")
			}
			data, err := unpad(fh, p)
			if err != nil {
				return err
			}
			// Flow control counts the whole frame, padding included.
			if fh.length > 0 {
				if err := c.windowUpdate(0, fh.length); err != nil {
					return err
				}
			}
			s := c.stream(fh.stream)
			if s == nil {
				continue // a stream the host has ended
			}
			if err := s.feed(data); err != nil {
				c.reset(s, err)
				continue
			}
			if fh.flags&flagEndStream != 0 {
				c.endStream(s)
			} else if fh.length > 0 {
				if err := c.windowUpdate(fh.stream, fh.length); err != nil {
					return err
				}
			}
		case frameHeaders:
			if fh.stream == 0 {
				return errors.New("HEADERS on stream 0")
			}
			frag, err := unpad(fh, p)
			if err != nil {
				return err
			}
			if fh.flags&flagPriority != 0 {
				if len(frag) < 5 {
					return errors.New("HEADERS too short for its priority")
				}
				frag = frag[5:]
			}
			block = append(block[:0], frag...)
			blockID, blockEnd = fh.stream, fh.flags&flagEndStream != 0
			inBlock = fh.flags&flagEndHeaders == 0
			if !inBlock {
				if err := c.headerBlock(dec, blockID, block, blockEnd); err != nil {
					return err
				}
			}
		case frameContinuation:
			if !inBlock {
				return errors.New("CONTINUATION without HEADERS")
			}
			if len(block)+len(p) > maxHeaderBlock {
				return fmt.Errorf("a header block of more than %d bytes", maxHeaderBlock)
			}
			block = append(block, p...)
			inBlock = fh.flags&flagEndHeaders == 0
			if !inBlock {
				if err := c.headerBlock(dec, blockID, block, blockEnd); err != nil {
					return err
				}
			}
		case frameRSTStream:
			if fh.stream == 0 || len(p) != 4 {
				return errors.New("a malformed RST_STREAM")
			}
			if s := c.stream(fh.stream); s != nil && c.forget(s) {
				s.finish(fmt.Errorf("%w (HTTP/2 error %s)", errPluginReset, h2ErrName(binary.BigEndian.Uint32(p))))
			}
		case frameSettings:
			if err := c.settings(fh, p); err != nil {
				return err
			}
		case framePing:
			if fh.stream != 0 || len(p) != 8 {
				return errors.New("a malformed PING")
			}
			if fh.flags&flagAck == 0 {
				if err := c.writeFrame(framePing, flagAck, 0, p); err != nil {
					return err
				}
			}
		case frameGoAway:
			if fh.stream != 0 || len(p) < 8 {
				return errors.New("a malformed GOAWAY")
			}
			c.goAway(binary.BigEndian.Uint32(p)&h2MaxWin, binary.BigEndian.Uint32(p[4:]), p[8:])
		case frameWindowUpdate:
			if len(p) != 4 {
				return errors.New("a malformed WINDOW_UPDATE")
			}
			if err := c.windowFromPeer(fh.stream, int64(binary.BigEndian.Uint32(p)&h2MaxWin)); err != nil {
				return err
			}
		case framePushPromise:
			return errors.New("PUSH_PROMISE, which the host turned off")
		default:
			// PRIORITY, and types this client does not know: ignored, as
			// RFC 9113 §4.1 says.
		}
	}
}

// settings applies the plugin's SETTINGS and acknowledges them.
func (c *h2conn) settings(fh frameHeader, p []byte) error {
	if fh.stream != 0 || len(p)%6 != 0 || (fh.flags&flagAck != 0 && len(p) != 0) {
		return errors.New("a malformed SETTINGS")
	}
	if fh.flags&flagAck != 0 {
		return nil
	}
	for ; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case settingInitialWindow:
			if v > h2MaxWin {
				return fmt.Errorf("SETTINGS_INITIAL_WINDOW_SIZE %d", v)
			}
			var bad error
			c.grow(func() {
				delta := int64(v) - c.peerWin
				c.peerWin = int64(v)
				for _, s := range c.streams {
					s.sendWin += delta
					if s.sendWin > h2MaxWin {
						bad = errors.New("a stream's send window overflowed")
					}
				}
			})
			if bad != nil {
				return bad
			}
		case settingMaxFrameSize:
			if v < h2MaxFrame || v > 1<<24-1 {
				return fmt.Errorf("SETTINGS_MAX_FRAME_SIZE %d", v)
			}
			c.mu.Lock()
			c.peerFrame = v
			c.mu.Unlock()
		}
	}
	return c.writeFrame(frameSettings, flagAck, 0, nil)
}

func (c *h2conn) windowFromPeer(stream uint32, inc int64) error {
	if inc == 0 {
		if stream == 0 {
			return errors.New("a WINDOW_UPDATE of 0 for the connection")
		}
		if s := c.stream(stream); s != nil && c.forget(s) {
			s.finish(errors.New("the plugin sent a WINDOW_UPDATE of 0"))
		}
		return nil
	}
	var bad error
	c.grow(func() {
		if stream == 0 {
			c.sendWin += inc
			if c.sendWin > h2MaxWin {
				bad = errors.New("the connection's send window overflowed")
			}
			return
		}
		if s := c.streams[stream]; s != nil {
			s.sendWin += inc
			if s.sendWin > h2MaxWin {
				bad = errors.New("a stream's send window overflowed")
			}
		}
	})
	return bad
}

// goAway: streams the plugin will not answer fail, and no new one starts.
func (c *h2conn) goAway(last, code uint32, debug []byte) {
	err := fmt.Errorf("the plugin closed the connection (GOAWAY, HTTP/2 error %s%s)", h2ErrName(code), debugNote(debug))
	c.mu.Lock()
	if c.goaway == nil {
		c.goaway = err
	}
	var gone []*h2stream
	for id, s := range c.streams {
		if id > last {
			gone = append(gone, s)
			delete(c.streams, id)
		}
	}
	c.mu.Unlock()
	for _, s := range gone {
		s.finish(err)
	}
}

func debugNote(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf(": %q", strings.ToValidUTF8(string(b[:min(len(b), 200)]), "\uFFFD"))
}

func h2ErrName(code uint32) string {
	names := []string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
		"STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
		"ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("0x%x", code)
}

// headerBlock decodes a complete header block (always, so that the
// decoder's table stays in step) and gives it to its stream.
func (c *h2conn) headerBlock(dec *hpackDecoder, id uint32, block []byte, end bool) error {
	fields, err := dec.decode(block)
	if err != nil {
		return fmt.Errorf("a header block: %w", err)
	}
	s := c.stream(id)
	if s == nil {
		return nil
	}
	if err := s.headers(fields, end); err != nil {
		c.reset(s, err)
		return nil
	}
	if end {
		c.endStream(s)
	}
	return nil
}

// headers takes the answer's headers or its trailers.
func (s *h2stream) headers(fields []hpackField, end bool) error {
	first := !s.gotHeaders
	s.gotHeaders = true
	if !first && !end {
		return errors.New("a second header block that does not end the answer")
	}
	var httpStatus, contentType, status string
	var hasStatus bool
	for _, f := range fields {
		switch f.name {
		case ":status":
			httpStatus = f.value
		case "content-type":
			contentType = f.value
		case "grpc-status":
			status, hasStatus = f.value, true
		case "grpc-message":
			s.grpcMessage = percentDecode(f.value)
		}
	}
	if first {
		if httpStatus != "200" {
			return fmt.Errorf("HTTP status %q", httpStatus)
		}
		if contentType != "application/grpc" && !strings.HasPrefix(contentType, "application/grpc+") && !strings.HasPrefix(contentType, "application/grpc;") {
			return fmt.Errorf("content-type %q, not gRPC", contentType)
		}
	}
	if hasStatus {
		code, err := strconv.Atoi(status)
		if err != nil || code < 0 || code > 1000 {
			return fmt.Errorf("grpc-status %q", status)
		}
		s.grpcStatus = code
	}
	return nil
}

// endStream ends s as the plugin ended it.
func (c *h2conn) endStream(s *h2stream) {
	if !c.forget(s) {
		return
	}
	var err error
	switch {
	case !s.gotHeaders:
		err = errors.New("the answer ended before its headers")
	case s.grpcStatus < 0:
		err = errors.New("the answer ended without a grpc-status")
	case len(s.buf) > 0:
		err = fmt.Errorf("the answer ended inside a message (%d bytes of it)", len(s.buf))
	}
	s.finish(err)
}

// feed takes DATA: the gRPC messages in it, whole or in pieces.
func (s *h2stream) feed(data []byte) error {
	if !s.gotHeaders {
		return errors.New("DATA before HEADERS")
	}
	if s.grpcStatus >= 0 {
		return errors.New("DATA after the trailers")
	}
	s.buf = append(s.buf, data...)
	for len(s.buf) >= 5 {
		if s.buf[0] != 0 {
			return fmt.Errorf("a message with flags %#x (compressed: the host asked for none)", s.buf[0])
		}
		n := binary.BigEndian.Uint32(s.buf[1:5])
		if n > MaxMessage {
			return fmt.Errorf("a message of %d bytes: more than the %d bytes allowed (plugin.MaxMessage)", n, MaxMessage)
		}
		if uint32(len(s.buf)-5) < n {
			break
		}
		msg := s.buf[5 : 5+n : 5+n]
		rest := s.buf[5+n:]
		if s.onMsg != nil {
			if err := s.onMsg(msg); err != nil {
				return err
			}
			s.buf = append(s.buf[:0], rest...)
			continue
		}
		if len(s.msgs) > 0 {
			return errors.New("a second message in a unary answer")
		}
		s.msgs = append(s.msgs, msg)
		s.buf = append([]byte(nil), rest...)
	}
	return nil
}

// percentDecode undoes grpc-message's percent-encoding; a malformed escape
// is kept as it is.
func percentDecode(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// Protobuf, by hand: the host's messages are a BytesValue (field 1,
// bytes), an Empty, and go-plugin's StdioData (field 1, an enum; field 2,
// bytes).

// encodeBytesValue is google.protobuf.BytesValue{value: b}.
func encodeBytesValue(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	out := binary.AppendUvarint([]byte{0x0a}, uint64(len(b)))
	return append(out, b...)
}

// protoFields calls f with each field of msg: its number, wire type and,
// for a varint, its value, for a length-delimited field, its bytes.
func protoFields(msg []byte, f func(num uint64, typ int, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errors.New("protobuf: a malformed field key")
		}
		msg = msg[n:]
		num, typ := key>>3, int(key&7)
		if num == 0 || num > 1<<29-1 {
			return fmt.Errorf("protobuf: field number %d", num)
		}
		var v uint64
		var b []byte
		switch typ {
		case 0:
			if v, n = binary.Uvarint(msg); n <= 0 {
				return errors.New("protobuf: a malformed varint")
			}
			msg = msg[n:]
		case 1, 5:
			size := 8
			if typ == 5 {
				size = 4
			}
			if len(msg) < size {
				return errors.New("protobuf: a truncated fixed field")
			}
			msg = msg[size:]
		case 2:
			l, n := binary.Uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return errors.New("protobuf: a malformed or truncated length")
			}
			b, msg = msg[n:n+int(l)], msg[n+int(l):]
		default:
			return fmt.Errorf("protobuf: wire type %d", typ)
		}
		if err := f(num, typ, v, b); err != nil {
			return err
		}
	}
	return nil
}

// decodeBytesValue reads a BytesValue: the last field 1 wins, as in
// protobuf; other fields are ignored.
func decodeBytesValue(msg []byte) ([]byte, error) {
	var out []byte
	err := protoFields(msg, func(num uint64, typ int, _ uint64, b []byte) error {
		if num != 1 {
			return nil
		}
		if typ != 2 {
			return fmt.Errorf("BytesValue: field 1 of wire type %d", typ)
		}
		out = b
		return nil
	})
	return out, err
}

// stdioData reads go-plugin's StdioData: which stream (1 stdout, 2
// stderr) and the bytes.
func stdioData(msg []byte) (channel uint64, data []byte, err error) {
	err = protoFields(msg, func(num uint64, typ int, v uint64, b []byte) error {
		switch {
		case num == 1 && typ == 0:
			channel = v
		case num == 2 && typ == 2:
			data = b
		case num == 1 || num == 2:
			return fmt.Errorf("StdioData: field %d of wire type %d", num, typ)
		}
		return nil
	})
	return channel, data, err
}
