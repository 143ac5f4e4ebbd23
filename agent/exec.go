package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// execRequest is the body of POST /v1/exec.
type execRequest struct {
	spec
	// Stdin is fed to the command, then closed (base64 in JSON).
	Stdin     []byte `json:"stdin,omitempty"`
	TimeoutMs int64  `json:"timeout_ms,omitempty"`
	// KeepBackground leaves running what the command started in the background; only the
	// server sets it, for processes it starts itself (Chromium, the browser relay).
	KeepBackground bool `json:"keep_background,omitempty"`
}

// exitStatus is the last frame of a run.
type exitStatus struct {
	ExitCode   int   `json:"exit_code"`
	TimedOut   bool  `json:"timed_out"`
	OOMKilled  bool  `json:"oom_killed,omitempty"`
	DurationMs int64 `json:"duration_ms"`
}

// outputGrace is how long output may keep flowing after the command exits: background children
// that inherited stdout would otherwise hold the run open forever.
const outputGrace = 100 * time.Millisecond

const maxRequestBytes = 64 << 20

// handleExec runs one command and streams its output as frames while it runs. When it ends
// (exit, timeout or a client that goes away) its whole process tree is killed.
func (a *agent) handleExec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "exec request: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/vnd.sandboxd.frames")
	w.WriteHeader(http.StatusOK)
	frames := newFrameWriter(w)
	// The client learns at once that the command started, even if it prints nothing for long.
	frames.flush()
	started := time.Now()
	status := a.run(req, frames, r.Context().Done())
	status.DurationMs = time.Since(started).Milliseconds()
	frames.writeJSON(frameExit, status)
}

// run starts the command and waits for it, for its timeout, or for cancel.
func (a *agent) run(req execRequest, frames *frameWriter, cancel <-chan struct{}) exitStatus {
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		frames.writeJSON(frameError, map[string]string{"error": err.Error()})
		return exitStatus{ExitCode: 126}
	}
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		stdout.Close()
		stdoutW.Close()
		frames.writeJSON(frameError, map[string]string{"error": err.Error()})
		return exitStatus{ExitCode: 126}
	}
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = bytes.NewReader(req.Stdin)
	}
	oomBefore, oomKnown := oomKills()
	proc, err := startProcess(req.spec, a.defaultUser, a.dropCaps, stdin, stdoutW, stderrW)
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdout.Close()
		stderr.Close()
		var start *startError
		if errors.As(err, &start) {
			frames.write(frameStderr, []byte("sandboxd-agent: "+start.msg+"\n"))
			return exitStatus{ExitCode: start.code}
		}
		frames.writeJSON(frameError, map[string]string{"error": err.Error()})
		return exitStatus{ExitCode: 126}
	}

	var readers sync.WaitGroup
	for _, pipe := range []struct {
		file *os.File
		kind byte
	}{{stdout, frameStdout}, {stderr, frameStderr}} {
		readers.Add(1)
		go func(file *os.File, kind byte) {
			defer readers.Done()
			io.Copy(streamWriter{frames, kind}, file)
		}(pipe.file, pipe.kind)
	}

	// The time limit covers the whole exec: the command, its output's grace and the killing of
	// what it left behind (a fork bomb whose first shell exits at once is still a timeout when its
	// processes are not all dead by then).
	var timeout <-chan time.Time
	var deadline time.Time
	if req.TimeoutMs > 0 {
		deadline = time.Now().Add(time.Duration(req.TimeoutMs) * time.Millisecond)
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		timeout = timer.C
	}
	var result exitStatus
	var wait syscall.WaitStatus
	select {
	case wait = <-proc.done:
	case <-timeout:
		proc.killTree()
		wait = <-proc.done
		result.TimedOut = true
	case <-cancel:
		proc.killTree()
		wait = <-proc.done
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
		stdout.Close()
		stderr.Close()
		<-drained
	}
	stdout.Close()
	stderr.Close()
	// An exec's processes end with it: whatever the command left behind (background jobs,
	// daemons that called setsid, a fork bomb) is killed once its output is read. What must
	// outlive a command is started detached.
	if req.KeepBackground {
		runs.keep(proc)
	} else {
		if proc.mayHaveSurvivors() {
			proc.killTree()
		}
		runs.release(proc)
	}
	if !deadline.IsZero() && time.Now().After(deadline) {
		result.TimedOut = true
	}
	result.ExitCode = exitCode(wait)
	if result.TimedOut {
		result.ExitCode = 124
	} else if (wait.Signaled() && wait.Signal() == syscall.SIGKILL || result.ExitCode == 137) && oomKnown {
		// SIGKILL (or a shell's 137 for its child's) while an OOM killer counted a new kill: the
		// kernel's in the sandbox's memory cgroup, or the agent's memory guard under gVisor.
		after, _ := oomKills()
		result.OOMKilled = after > oomBefore
	}
	return result
}

// The sandbox's memory cgroup as the container sees it: cgroup v2, then v1.
var (
	memoryEventsFile = "/sys/fs/cgroup/memory.events"
	oomControlFile   = "/sys/fs/cgroup/memory/memory.oom_control"
)

// oomKills is how many processes an OOM killer has killed in the sandbox: the kernel's in its
// memory cgroup (the oom_kill line of memory.events or memory.oom_control) and the agent's memory
// guard (memory_guard.go); false where neither the files say nor the guard runs.
func oomKills() (int64, bool) {
	kernel, known := cgroupOOMKills()
	if memoryGuarded.Load() {
		return kernel + guardKills.Load(), true
	}
	return kernel, known
}

// cgroupOOMKills is the kernel OOM killer's count in the sandbox's memory cgroup, where a file says (not under gVisor).
func cgroupOOMKills() (int64, bool) {
	for _, path := range []string{memoryEventsFile, oomControlFile} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "oom_kill ") {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "oom_kill ")), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
