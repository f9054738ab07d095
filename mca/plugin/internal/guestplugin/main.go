// Command guestplugin is a plugin built with the guest SDK (go-plugin and
// gRPC), for the tests of the host's own client of that wire. Installed as
// gompi-coll-<name>, it is component <name> with one parameter,
// coll_<name>_word. What it answers is the query's text:
//
//	echo:X       the opened value of coll_<name>_word, ":", then X
//	size:N       N bytes of a pattern (byte i is i*7+3 mod 256): an answer
//	             larger than HTTP/2's 64 KiB window
//	len          the length of the question (which may be large) and its
//	             checksum, as "N:SUM"
//	fail         an error of its own ("asked to fail")
//	die          exits, status 3, in the middle of the call, after a line
//	             on stderr
//	chatty:N     N bytes to os.Stdout and N to os.Stderr (which go-plugin
//	             points at its stdio stream), and N to each of the real
//	             pipes, in lines "<where> line <k>", then "ok"
//	sleep:D      sleeps D (a time.ParseDuration) before answering "slept"
//	trailing:N   answers "ok", then writes N lines "trailing line <k>" to
//	             os.Stderr (the stdio stream), one every 5 ms
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin/sdk"
	"github.com/gompi/gompi/params"
)

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "gompi-coll-")
	word := "coll_" + name + "_word"
	// The pipes themselves: after the handshake go-plugin's Serve points
	// os.Stdout and os.Stderr at its stdio stream.
	pipeOut, pipeErr := os.Stdout, os.Stderr
	sdk.Serve(sdk.Guest{
		Info:   mca.Info{Framework: "coll", Name: name, Version: mca.Version{Major: 1, Minor: 2, Patch: 3}, API: mca.Version{Major: 1}, Priority: 42},
		Params: []params.Def{{Name: word, Type: params.String, Default: "hello", Level: 5, Help: "What echo says first"}},
		Query: func(_ context.Context, values map[string]string, req []byte) ([]byte, error) {
			q := string(req)
			verb, arg, _ := strings.Cut(q, ":")
			switch verb {
			case "echo":
				return []byte(values[word] + ":" + arg), nil
			case "size":
				n, err := strconv.Atoi(arg)
				if err != nil {
					return nil, err
				}
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(i*7 + 3)
				}
				return b, nil
			case "len":
				var sum uint32
				for _, c := range req {
					sum = sum*31 + uint32(c)
				}
				return []byte(fmt.Sprintf("%d:%d", len(req), sum)), nil
			case "fail":
				return nil, errors.New("asked to fail")
			case "die":
				fmt.Fprintln(pipeErr, "guestplugin: dying in the middle of a call")
				os.Exit(3)
			case "chatty":
				n, err := strconv.Atoi(arg)
				if err != nil {
					return nil, err
				}
				for _, w := range []struct {
					f     *os.File
					where string
				}{{os.Stdout, "stream-out"}, {os.Stderr, "stream-err"}, {pipeOut, "pipe-out"}, {pipeErr, "pipe-err"}} {
					for k, sent := 0, 0; sent < n; k++ {
						m, _ := fmt.Fprintf(w.f, "%s line %d\n", w.where, k)
						sent += m
					}
				}
				return []byte("ok"), nil
			case "trailing":
				n, err := strconv.Atoi(arg)
				if err != nil {
					return nil, err
				}
				go func() {
					for k := 0; k < n; k++ {
						time.Sleep(5 * time.Millisecond)
						fmt.Fprintf(os.Stderr, "trailing line %d\n", k)
					}
				}()
				return []byte("ok"), nil
			case "sleep":
				d, err := time.ParseDuration(arg)
				if err != nil {
					return nil, err
				}
				time.Sleep(d)
				return []byte("slept"), nil
			}
			return nil, fmt.Errorf("unknown question %q", q)
		},
	})
}
