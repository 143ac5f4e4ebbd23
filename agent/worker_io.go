package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
)

// errLineTooLong: a worker printed a line longer than maxWorkerLine to its stdout.
var errLineTooLong = errors.New("line too long")

// readLine reads one line (its newline removed) of at most max bytes. A line longer than max
// is errLineTooLong (the reader is then in the middle of it); a last line without a newline
// is dropped at EOF, as it was never finished.
func readLine(reader *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := reader.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 || (err == nil && len(line)+len(chunk)-1 > max) {
			return nil, errLineTooLong
		}
		// ReadSlice's slice is only valid until the next read: append copies it.
		line = append(line, chunk...)
		if err == nil {
			return line[:len(line)-1], nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}

// workerLine is one line a worker printed to its stdout; tooLong marks one past maxWorkerLine.
type workerLine struct {
	data    []byte
	tooLong bool
}

// stderrDrain reads a worker's stderr all the time, so that a chatty worker never blocks on a
// full pipe, and keeps the last workerStderrBytes since the last take. Reads happen under one
// lock, from the drain goroutine or from `take`, which first reads whatever the pipe holds
// now: stderr printed just before the answer line is in the pipe when the answer arrives, but
// the goroutine may not have read it yet.
type stderrDrain struct {
	mu   sync.Mutex
	file *os.File
	raw  syscall.RawConn
	tail *tailBuffer
	buf  []byte
}

func newStderrDrain(file *os.File) (*stderrDrain, error) {
	raw, err := file.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &stderrDrain{file: file, raw: raw, tail: &tailBuffer{limit: workerStderrBytes}, buf: make([]byte, 32<<10)}, nil
}

// run drains the pipe until EOF or until the file is closed.
func (s *stderrDrain) run() {
	for {
		ended := false
		err := s.raw.Read(func(fd uintptr) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			// Read all the pipe holds; then wait for more (false) until it ends. Returning true on an
			// empty pipe would make Read return at once and this loop spin.
			_, eof := s.readAvailable(fd)
			ended = eof
			return eof
		})
		if err != nil || ended {
			return
		}
	}
}

// readAvailable reads the non-blocking pipe until it is empty (readable false: wait for more)
// or ends (eof). The caller holds the lock.
func (s *stderrDrain) readAvailable(fd uintptr) (readable, eof bool) {
	for {
		n, err := syscall.Read(int(fd), s.buf)
		switch {
		case n > 0:
			s.tail.Write(s.buf[:n])
			readable = true
			continue
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false, false
		default:
			return true, true
		}
	}
}

// take reads what the pipe holds now and returns (and forgets) what was kept since the last
// take. Every write to the tail happens under the lock held here.
func (s *stderrDrain) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Control(func(fd uintptr) { s.readAvailable(fd) })
	s.tail.mu.Lock()
	defer s.tail.mu.Unlock()
	data := string(s.tail.data)
	s.tail.data, s.tail.dropped = s.tail.data[:0], 0
	return data
}

// readLines sends every line of r on lines until EOF, a line too long (sent, marked, as the
// last one), or gone; then it closes lines.
func readLines(r io.Reader, lines chan<- workerLine, gone <-chan struct{}) {
	defer close(lines)
	reader := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(reader, maxWorkerLine)
		item := workerLine{data: line}
		if err == errLineTooLong {
			item = workerLine{tooLong: true}
		} else if err != nil {
			return
		}
		select {
		case lines <- item:
		case <-gone:
			return
		}
		if item.tooLong {
			return
		}
	}
}
