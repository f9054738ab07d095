package plugin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// fakePlugin is the plugin's end of an HTTP/2 connection, written frame by
// frame by a test: what the host's client does with frames grpc-go would
// rarely send (a reset, a GOAWAY, padding, small windows).
type fakePlugin struct {
	t      testing.TB
	nc     net.Conn
	frames chan hostFrame // what the host sent after its preface
	hbuf   bytes.Buffer
	enc    *hpack.Encoder
}

type hostFrame struct {
	fh frameHeader
	p  []byte
}

func newFake(t testing.TB) (*h2conn, *fakePlugin) {
	a, b := net.Pipe()
	f := &fakePlugin{t: t, nc: b, frames: make(chan hostFrame, 1024)}
	f.enc = hpack.NewEncoder(&f.hbuf)
	go func() {
		defer close(f.frames)
		pre := make([]byte, len(clientPreface))
		if _, err := io.ReadFull(b, pre); err != nil || !bytes.Equal(pre, clientPreface) {
			return
		}
		for {
			fh, p, err := readFrame(b, nil, 1<<24)
			if err != nil {
				return
			}
			f.frames <- hostFrame{fh, p}
		}
	}()
	c, err := newH2Conn(a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close(); b.Close() })
	if fr := f.next(frameSettings); fr.fh.flags&flagAck != 0 {
		t.Fatal("the host's first frame is a SETTINGS ACK")
	}
	return c, f
}

// next is the host's next frame of type typ; frames of other types
// before it are dropped.
func (f *fakePlugin) next(typ uint8) hostFrame {
	f.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case fr, ok := <-f.frames:
			if !ok {
				f.t.Fatalf("the connection ended before a frame of type %d", typ)
			}
			if fr.fh.typ == typ {
				return fr
			}
		case <-timeout:
			f.t.Fatalf("no frame of type %d from the host", typ)
		}
	}
}

func (f *fakePlugin) write(b []byte) {
	f.t.Helper()
	if _, err := f.nc.Write(b); err != nil {
		f.t.Fatalf("writing to the host: %v", err)
	}
}

// block is a header block of fields (name, value, name, value, ...) in
// the fake's encoder's state.
func (f *fakePlugin) block(fields ...string) []byte {
	f.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = f.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), f.hbuf.Bytes()...)
}

func frameBytes(typ, flags uint8, stream uint32, payload []byte) []byte {
	return appendFrame(nil, typ, flags, stream, payload)
}

var okHeaders = []string{":status", "200", "content-type", "application/grpc"}

// call runs a unary call in the background.
func call(c *h2conn, msg []byte) chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		b, err := c.unary("/svc/M", msg, 10*time.Second)
		ch <- callResult{b, err}
	}()
	return ch
}

type callResult struct {
	b   []byte
	err error
}

func wait(t *testing.T, ch chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
		return callResult{}
	}
}

// The host follows the plugin's SETTINGS (acknowledged) and windows: a
// 3000-byte question against a stream window of 1000 goes in pieces as
// WINDOW_UPDATEs come; it answers PING; it reads an answer split over
// padded DATA frames and a header block split over CONTINUATION, and
// gives back, in WINDOW_UPDATEs, the window each DATA frame took.
func TestH2FlowAndFraming(t *testing.T) {
	c, f := newFake(t)
	settings := binary.BigEndian.AppendUint16(nil, settingInitialWindow)
	settings = binary.BigEndian.AppendUint32(settings, 1000)
	f.write(frameBytes(frameSettings, 0, 0, settings))
	if fr := f.next(frameSettings); fr.fh.flags&flagAck == 0 {
		t.Fatal("the host did not acknowledge the plugin's SETTINGS")
	}
	f.write(frameBytes(framePing, 0, 0, []byte("12345678")))
	if fr := f.next(framePing); fr.fh.flags&flagAck == 0 || string(fr.p) != "12345678" {
		t.Fatalf("PING answered with flags %#x, %q", fr.fh.flags, fr.p)
	}
	question := bytes.Repeat([]byte("q"), 2995) // 3000 bytes with gRPC's prefix
	res := call(c, question)
	h := f.next(frameHeaders)
	var got []byte
	for {
		d := f.next(frameData)
		if d.fh.stream != h.fh.stream || len(d.p) > 1000 {
			t.Fatalf("DATA of %d bytes on stream %d, past the window of 1000", len(d.p), d.fh.stream)
		}
		got = append(got, d.p...)
		if d.fh.flags&flagEndStream != 0 {
			break
		}
		if len(got)%1000 == 0 {
			f.write(frameBytes(frameWindowUpdate, 0, h.fh.stream, binary.BigEndian.AppendUint32(nil, 1000)))
		}
	}
	if !bytes.Equal(got, grpcFrame(question)) {
		t.Fatalf("the host sent %d bytes, want the question's %d", len(got), len(question)+5)
	}
	id := h.fh.stream
	hdr := f.block(okHeaders...)
	f.write(frameBytes(frameHeaders, 0, id, hdr[:2]))
	f.write(frameBytes(frameContinuation, flagEndHeaders, id, hdr[2:]))
	answer := grpcFrame([]byte("the answer"))
	padded := append([]byte{3}, answer[:7]...)
	padded = append(padded, 0, 0, 0)
	f.write(frameBytes(frameData, flagPadded, id, padded))
	f.write(frameBytes(frameData, 0, id, answer[7:]))
	f.write(frameBytes(frameHeaders, flagEndHeaders|flagEndStream, id, f.block("grpc-status", "0")))
	if r := wait(t, res); r.err != nil || string(r.b) != "the answer" {
		t.Fatalf("%q, %v", r.b, r.err)
	}
	// Each DATA frame's length, padding included, comes back for the
	// connection and for the stream.
	for _, n := range []uint32{uint32(len(padded)), uint32(len(answer) - 7)} {
		for _, stream := range []uint32{0, id} {
			w := f.next(frameWindowUpdate)
			if w.fh.stream != stream || binary.BigEndian.Uint32(w.p) != n {
				t.Errorf("WINDOW_UPDATE of %d on stream %d, want %d on %d", binary.BigEndian.Uint32(w.p), w.fh.stream, n, stream)
			}
		}
	}
}

// What ends a call other than an answer, as errors that say which: a
// status (percent-decoded message, in a trailers-only answer), a reset, a
// GOAWAY (and no call after it), and the end of the connection.
func TestH2CallErrors(t *testing.T) {
	c, f := newFake(t)

	res := call(c, nil)
	id := f.next(frameHeaders).fh.stream
	f.write(frameBytes(frameHeaders, flagEndHeaders|flagEndStream, id,
		f.block(append(okHeaders, "grpc-status", "5", "grpc-message", "no%20such%20thing")...)))
	var rerr *rpcError
	if r := wait(t, res); !errors.As(r.err, &rerr) || rerr.code != 5 || rerr.msg != "no such thing" {
		t.Errorf("a status: %v, want code 5, \"no such thing\"", r.err)
	}

	res = call(c, nil)
	id = f.next(frameHeaders).fh.stream
	f.write(frameBytes(frameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, 7)))
	if r := wait(t, res); r.err == nil || !strings.Contains(r.err.Error(), "the plugin reset the call (HTTP/2 error REFUSED_STREAM)") {
		t.Errorf("a reset: %v", r.err)
	}

	res = call(c, nil)
	f.next(frameHeaders)
	goaway := binary.BigEndian.AppendUint32(nil, 0)
	goaway = binary.BigEndian.AppendUint32(goaway, 2)
	f.write(frameBytes(frameGoAway, 0, 0, append(goaway, "bye"...)))
	if r := wait(t, res); r.err == nil || !strings.Contains(r.err.Error(), `GOAWAY, HTTP/2 error INTERNAL_ERROR: "bye"`) {
		t.Errorf("a GOAWAY: %v", r.err)
	}
	if r := wait(t, call(c, nil)); r.err == nil || !strings.Contains(r.err.Error(), "GOAWAY") {
		t.Errorf("a call after GOAWAY: %v", r.err)
	}

	c2, f2 := newFake(t)
	res = call(c2, nil)
	f2.next(frameData) // the whole question: nothing left to write
	f2.write(frameBytes(frameHeaders, flagEndHeaders, 1, f2.block(okHeaders...)))
	f2.write(frameBytes(frameData, 0, 1, grpcFrame([]byte("half"))[:6]))
	f2.nc.Close()
	if r := wait(t, res); r.err == nil || !strings.Contains(r.err.Error(), "the connection to the plugin ended") {
		t.Errorf("the connection's end mid-answer: %v", r.err)
	}
}

// A plugin's server has the call's deadline too (grpc-timeout) and gives
// up on it by a reset or a DEADLINE_EXCEEDED status. When that comes
// before the host's own timer fires (a loaded machine runs the timer
// late), the call still fails as one that got no answer in time; before
// the deadline, a reset is the plugin's own doing and says so.
func TestH2PluginGivesUpAtTheDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	c, f := newFake(t)
	c.callTimer = func(time.Duration) *time.Timer { return time.NewTimer(time.Hour) }
	unary := func() chan callResult {
		ch := make(chan callResult, 1)
		go func() {
			b, err := c.unary("/svc/M", nil, timeout)
			ch <- callResult{b, err}
		}()
		return ch
	}
	for _, giveUp := range []struct {
		name  string
		frame func(id uint32) []byte
	}{
		{"a reset", func(id uint32) []byte {
			return frameBytes(frameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, h2Cancel))
		}},
		{"DEADLINE_EXCEEDED", func(id uint32) []byte {
			return frameBytes(frameHeaders, flagEndHeaders|flagEndStream, id, f.block(append(okHeaders, "grpc-status", "4")...))
		}},
	} {
		res := unary()
		id := f.next(frameHeaders).fh.stream
		time.Sleep(timeout + 10*time.Millisecond)
		f.write(giveUp.frame(id))
		if r := wait(t, res); !errors.Is(r.err, errCallTimeout) {
			t.Errorf("%s past the deadline: %v, want %v", giveUp.name, r.err, errCallTimeout)
		}
	}
	res := unary()
	id := f.next(frameHeaders).fh.stream
	f.write(frameBytes(frameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, h2Cancel)))
	if r := wait(t, res); !errors.Is(r.err, errPluginReset) || errors.Is(r.err, errCallTimeout) {
		t.Errorf("a reset before the deadline: %v, want the reset", r.err)
	}
}

// FuzzH2Conn: a plugin sends any bytes on its connection while the host
// has a unary call and a server stream open. The host never panics or
// hangs: the calls end, with an answer or an error, when the bytes do.
func FuzzH2Conn(f *testing.F) {
	var enc bytes.Buffer
	e := hpack.NewEncoder(&enc)
	block := func(fields ...string) []byte {
		enc.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			_ = e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return append([]byte(nil), enc.Bytes()...)
	}
	var good []byte
	good = append(good, frameBytes(frameSettings, 0, 0, []byte{0, 4, 0, 0, 0x10, 0})...)
	good = append(good, frameBytes(framePing, 0, 0, []byte("abcdefgh"))...)
	good = append(good, frameBytes(frameHeaders, flagEndHeaders, 1, block(okHeaders...))...)
	good = append(good, frameBytes(frameData, 0, 1, grpcFrame(encodeBytesValue([]byte("answer"))))...)
	good = append(good, frameBytes(frameHeaders, flagEndHeaders|flagEndStream, 1, block("grpc-status", "0"))...)
	stdio := append([]byte{0x08, 0x02, 0x12, 0x05}, "hello"...)
	good = append(good, frameBytes(frameHeaders, flagEndHeaders, 3, block(okHeaders...))...)
	good = append(good, frameBytes(frameData, 0, 3, grpcFrame(stdio))...)
	good = append(good, frameBytes(frameWindowUpdate, 0, 0, []byte{0, 0, 1, 0})...)
	good = append(good, frameBytes(frameRSTStream, 0, 3, []byte{0, 0, 0, 8})...)
	good = append(good, frameBytes(frameGoAway, 0, 0, []byte{0, 0, 0, 3, 0, 0, 0, 0})...)
	f.Add(good)
	f.Add(frameBytes(frameHeaders, flagEndHeaders|flagEndStream, 1, block(append(okHeaders, "grpc-status", "2", "grpc-message", "x%zz%41")...)))
	prio := append([]byte{2, 0, 0, 0, 0, 9}, block(okHeaders...)...)
	f.Add(append(frameBytes(frameHeaders, flagPadded|flagPriority, 1, append(prio, 0, 0)),
		frameBytes(frameContinuation, flagEndHeaders, 1, nil)...))
	f.Add(frameBytes(frameData, flagPadded|flagEndStream, 1, []byte{200, 1}))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		started := make(chan struct{})
		go func() {
			// The host's frames: drained, so that it never blocks.
			pre := make([]byte, len(clientPreface))
			if _, err := io.ReadFull(b, pre); err != nil {
				return
			}
			headers := 0
			for {
				fh, _, err := readFrame(b, nil, 1<<24)
				if err != nil {
					return
				}
				if fh.typ == frameHeaders {
					if headers++; headers == 2 {
						close(started)
					}
				}
			}
		}()
		c, err := newH2Conn(a, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		res := call(c, []byte("question"))
		stream := make(chan error, 1)
		go func() {
			// Opened second: stream 3, as a server stream's messages.
			s, err := c.open(stdioMethod, nil, 0, func(msg []byte) error {
				_, _, err := stdioData(msg)
				return err
			})
			if err == nil {
				<-s.done
				err = s.streamErr()
			}
			stream <- err
		}()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the host did not open its calls")
		}
		_, _ = b.Write(in)
		b.Close()
		select {
		case <-res:
		case <-time.After(10 * time.Second):
			t.Fatal("the unary call did not end with the connection")
		}
		select {
		case <-stream:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end with the connection")
		}
	})
}

// FuzzParseHandshake: any first line is a handshake or an error, never a
// panic; one that parses says what a line rebuilt from it says.
func FuzzParseHandshake(f *testing.F) {
	for _, s := range []string{
		"1|1|unix|/tmp/plugin2634677161|grpc|", "1|1|tcp|127.0.0.1:41234|grpc", "1|99|unix|/x|grpc||true",
		"1|1|tcp|[::1]:80|grpc|" + strings.Repeat("A", 60), "2|1|unix|/x|grpc", "1|x|unix|/x", "|||", "\xff|\x00|unix|/\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		hs, err := parseHandshake(line)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if hs.network != "unix" && hs.network != "tcp" || hs.addr == "" || hs.api < 0 {
			t.Fatalf("%q: %+v", line, hs)
		}
		again, err := parseHandshake("1|" + strconv.Itoa(hs.api) + "|" + hs.network + "|" + hs.addr + "|grpc")
		if err != nil || again != hs {
			t.Fatalf("%q gives %+v; rebuilt, %+v, %v", line, hs, again, err)
		}
	})
}

// FuzzProtoMessages: the protobuf the host reads (a BytesValue, go-plugin's
// StdioData) is decoded or refused, never a panic; a BytesValue the host
// encodes decodes to its bytes.
func FuzzProtoMessages(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c'})
	f.Add([]byte{0x08, 0x02, 0x12, 0x01, 'x', 0x1d, 1, 2, 3, 4})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x0b})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeBytesValue(b)
		_, _, _ = stdioData(b)
		v, err := decodeBytesValue(encodeBytesValue(b))
		if err != nil || !bytes.Equal(v, b) {
			t.Fatalf("%q encoded and decoded: %q, %v", b, v, err)
		}
	})
}
