package main

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// The agent runs as PID 1, so every orphan in the sandbox becomes its child. One reaper owns
// all wait4 calls: it reaps orphans (no zombies pile up) and hands the status of the processes
// the agent started to whoever waits for them. exec.Cmd.Wait is never used, because a wait4(-1)
// in the reaper would race it.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
}

var children = &reaper{waiters: map[int]chan syscall.WaitStatus{}}

// forkGate keeps the agent's own forks apart from what signals processes it finds in /proc (a
// round of killTree, reset's kill(-1)). Between its fork and its exec, a child is a copy of the
// agent that is neither registered nor in a session of its own: a round would take it for an
// orphan and stop it (kill(-1, SIGSTOP) or its own SIGSTOP), and since the fork returns only
// after the exec, the starter would wait forever while holding the reaper's lock, which the
// round then needs (a whole sandbox hung so). Forks share the gate (read); a round holds it
// alone (write), so it starts once the forks under way have exec'd and been registered.
var forkGate sync.RWMutex

// start launches a process and registers it before the reaper can see its exit: the lock is
// held from Start to registration, and the reaper needs the lock to deliver a status. The fork
// gate is taken first, so that a round holding it never waits for the reaper's lock.
func (r *reaper) start(start func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	forkGate.RLock()
	defer forkGate.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, nil, err
	}
	done := make(chan syscall.WaitStatus, 1)
	r.waiters[pid] = done
	return pid, done, nil
}

// startCmd starts cmd through start: its exit goes to the returned channel, not to the reaping loop.
func startCmd(cmd *exec.Cmd) (int, <-chan syscall.WaitStatus, error) {
	return children.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
}

// started says whether pid is a process the agent started and still waits for.
func (r *reaper) started(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.waiters[pid]
	return ok
}

// run reaps every exited child on each SIGCHLD, forever.
func (r *reaper) run() {
	signals := make(chan os.Signal, 64)
	signal.Notify(signals, syscall.SIGCHLD)
	for range signals {
		r.reapAll()
	}
}

func (r *reaper) reapAll() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		r.mu.Lock()
		if done, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			done <- status
		}
		r.mu.Unlock()
	}
}
