package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// ptyProtocol is the Upgrade token of POST /v1/pty: after the 101 answer the connection carries
// frames both ways (frames.go's layout: a type byte, a 4-byte big-endian length, the payload).
const ptyProtocol = "sandboxd-pty"

// Frame types a terminal's client sends; the agent sends frameStdout (the terminal's output),
// then frameExit (JSON {exit_code}) as the last frame.
const (
	frameInput  byte = 5 // raw bytes for the terminal
	frameResize byte = 6 // JSON {"cols": N, "rows": N}
)

// maxTerminalSide bounds cols and rows (the kernel keeps them as 16-bit numbers).
const maxTerminalSide = 1000

// ptyRequest is the body of POST /v1/pty. Argv defaults to the sandbox's shell (bash if it has
// one, else sh); the process runs as User (the default user when empty) in Cwd.
type ptyRequest struct {
	spec
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// ptySize is a resize frame's payload.
type ptySize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// handlePty starts a shell on a new pseudo-terminal and, once it runs, upgrades the connection:
// the client's input frames are written to the terminal, resize frames set its size, and what
// the terminal prints comes back as output frames, then the exit frame. When the client goes
// away the shell's whole process tree is killed; when the shell exits, whatever it left in the
// background is killed too. A shell that cannot start is an HTTP error before the upgrade.
func (a *agent) handlePty(w http.ResponseWriter, r *http.Request) {
	var req ptyRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "pty request: "+err.Error())
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), ptyProtocol) {
		writeError(w, http.StatusBadRequest, "POST /v1/pty needs the header Upgrade: "+ptyProtocol)
		return
	}
	if err := checkSize(ptySize{req.Cols, req.Rows}); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	master, proc, err := a.startTerminal(req)
	if err != nil {
		var start *startError
		if errors.As(err, &start) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]interface{}{"error": start.msg, "exit_code": start.code})
		} else {
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	defer master.Close()
	conn, buffered, err := w.(http.Hijacker).Hijack()
	defer runs.release(proc)
	if err != nil {
		proc.killTree()
		<-proc.done
		return
	}
	defer conn.Close()
	buffered.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + ptyProtocol + "\r\nConnection: Upgrade\r\n\r\n")
	buffered.Flush()
	frames := &frameWriter{w: conn}
	clientGone := make(chan struct{})
	go func() {
		readTerminalInput(buffered.Reader, master)
		close(clientGone)
	}()
	output := make(chan struct{})
	go func() {
		io.Copy(streamWriter{frames, frameStdout}, master)
		close(output)
	}()
	var wait syscall.WaitStatus
	select {
	case wait = <-proc.done:
	case <-clientGone:
		proc.killTree()
		<-proc.done
		return
	}
	// What the shell printed last is still in the terminal; background jobs that keep it open
	// are killed below, so the wait is bounded.
	select {
	case <-output:
	case <-time.After(outputGrace):
	}
	proc.killTree()
	master.Close()
	<-output
	frames.writeJSON(frameExit, map[string]int{"exit_code": exitCode(wait)})
}

// startTerminal opens a pseudo-terminal of the requested size and starts the shell on it as a
// session leader with the terminal as its controlling one; it returns the master side.
func (a *agent) startTerminal(req ptyRequest) (*os.File, *process, error) {
	id, err := resolveUser(req.User, a.defaultUser)
	if err != nil {
		return nil, nil, &startError{code: 126, msg: err.Error()}
	}
	master, slave, err := openPtyAs(id)
	if err != nil {
		return nil, nil, err
	}
	defer slave.Close()
	if err := setWindowSize(master, ptySize{req.Cols, req.Rows}); err != nil {
		master.Close()
		return nil, nil, err
	}
	s := req.spec
	if len(s.Argv) == 0 {
		s.Argv = []string{defaultShell()}
	}
	s.Env = mergeEnv([]string{"TERM=xterm-256color", "SHELL=" + s.Argv[0]}, s.Env)
	s.tty = slave
	proc, err := startProcess(s, a.defaultUser, a.dropCaps, nil, slave, slave)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, proc, nil
}

// typeAhead is how many input frames may wait while the shell reads none (beyond the terminal's
// own buffer); past it the session ends, so that the connection is always being read and a
// client that leaves is noticed.
const typeAhead = 1024

// readTerminalInput applies the client's frames to the terminal until the client goes away (or
// sends a frame that does not parse, or types too far ahead, which end the session the same way).
func readTerminalInput(conn *bufio.Reader, master *os.File) {
	inputs := make(chan []byte, typeAhead)
	defer close(inputs)
	go func() {
		for input := range inputs {
			master.Write(input)
		}
	}()
	var header [5]byte
	for {
		if _, err := io.ReadFull(conn, header[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(header[1:])
		if size > maxRequestBytes {
			return
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(conn, payload); err != nil {
			return
		}
		switch header[0] {
		case frameInput:
			select {
			case inputs <- payload:
			default:
				return
			}
		case frameResize:
			var size ptySize
			if json.Unmarshal(payload, &size) == nil && checkSize(size) == nil {
				setWindowSize(master, size)
			}
		}
	}
}

// defaultShell is bash where the sandbox has it, else sh.
func defaultShell() string {
	for _, shell := range []string{"/bin/bash", "/usr/bin/bash"} {
		if checkExecutable(shell) == nil {
			return shell
		}
	}
	return "/bin/sh"
}

func checkSize(size ptySize) error {
	if size.Cols < 1 || size.Cols > maxTerminalSide || size.Rows < 1 || size.Rows > maxTerminalSide {
		return fmt.Errorf("cols and rows must be 1-%d (got %dx%d)", maxTerminalSide, size.Cols, size.Rows)
	}
	return nil
}

// openPty opens a new pseudo-terminal pair through /dev/ptmx: the master is unlocked
// (TIOCSPTLCK) and its number (TIOCGPTN) names the slave under /dev/pts. Neither becomes the
// agent's controlling terminal.
func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlocking the pseudo-terminal: %w", err)
	}
	var number uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&number)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("numbering the pseudo-terminal: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", number), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// setWindowSize sets the terminal's size (TIOCSWINSZ); the kernel sends SIGWINCH to its
// foreground process group.
func setWindowSize(terminal *os.File, size ptySize) error {
	winsize := [4]uint16{uint16(size.Rows), uint16(size.Cols), 0, 0}
	return ioctl(terminal, syscall.TIOCSWINSZ, unsafe.Pointer(&winsize))
}

// windowSize reads the terminal's size (TIOCGWINSZ).
func windowSize(terminal *os.File) (ptySize, error) {
	var winsize [4]uint16
	err := ioctl(terminal, syscall.TIOCGWINSZ, unsafe.Pointer(&winsize))
	return ptySize{Cols: int(winsize[1]), Rows: int(winsize[0])}, err
}

func ioctl(file *os.File, request uintptr, arg unsafe.Pointer) error {
	conn, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := conn.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, request, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
