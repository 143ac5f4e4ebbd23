package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Frame types of a streamed exec response. Each frame is a 1-byte type, a 4-byte big-endian
// payload length and the payload, so output is delivered in arrival order as it is produced.
const (
	frameStdout byte = 1
	frameStderr byte = 2
	frameExit   byte = 3 // JSON exitStatus; always the last frame of a run that started
	frameError  byte = 4 // JSON {"error": "..."}; the command could not run
)

// frameWriter serialises frames from several goroutines onto one response and flushes each,
// so the client sees output as soon as the command prints it.
type frameWriter struct {
	mu      sync.Mutex
	w       io.Writer
	flusher http.Flusher
	failed  bool
}

func newFrameWriter(w http.ResponseWriter) *frameWriter {
	flusher, _ := w.(http.Flusher)
	return &frameWriter{w: w, flusher: flusher}
}

// write sends one frame; after the first write error (the client went away) it drops frames.
func (f *frameWriter) write(kind byte, payload []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		return
	}
	var header [5]byte
	header[0] = kind
	binary.BigEndian.PutUint32(header[1:], uint32(len(payload)))
	if _, err := f.w.Write(header[:]); err != nil {
		f.failed = true
		return
	}
	if _, err := f.w.Write(payload); err != nil {
		f.failed = true
		return
	}
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

func (f *frameWriter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

func (f *frameWriter) writeJSON(kind byte, value interface{}) {
	payload, _ := json.Marshal(value)
	f.write(kind, payload)
}

// streamWriter is an io.Writer that turns each write into a frame of one kind.
type streamWriter struct {
	frames *frameWriter
	kind   byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	chunk := make([]byte, len(p))
	copy(chunk, p)
	s.frames.write(s.kind, chunk)
	return len(p), nil
}
