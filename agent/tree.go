package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A command's processes end with it, whatever they did to leave: every command starts in a
// session of its own (so in a process group of its own too), and its processes are, at any
// moment, those of its group or session, their descendants, and the processes re-parented to the
// agent that no live command owns. The kernel keeps a process's parent, group and session in
// /proc/N/stat, which every user may read (under gVisor too), so the agent finds them without
// reading any environment and without forking: a process that calls setsid leaves the session
// but keeps its parent, and once its parent is gone it is an orphan of the agent's. Which live
// command an orphan belongs to says its group, its session or the SANDBOXD_EXEC_TAG in its
// environment; an orphan none of them claims is a leftover of a command that ended (or one that
// left its session and hid its tag) and goes with the next command that ends.

// killTreeLimit bounds how long killTree keeps searching: a fork bomb ends within a few rounds.
const killTreeLimit = 10 * time.Second

// liveRuns are the started commands whose processes are not all known to be dead: execs, file
// operations and terminals until they are released; detached commands, workers and kept
// background processes until a reset.
type liveRuns struct {
	mu    sync.Mutex
	procs map[*process]bool // value: kept until a reset (detached, workers, kept background)
}

var runs = &liveRuns{procs: map[*process]bool{}}

func (r *liveRuns) add(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[p] = false
}

// keep makes p live until a reset: what it leaves running is wanted (a detached command, a
// worker, an exec that keeps its background processes).
func (r *liveRuns) keep(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[p] = true
}

// release says that p and everything it started are dead (or to be killed by the next command
// that ends).
func (r *liveRuns) release(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, p)
}

// forgetKept drops the runs a reset ended (it killed every process).
func (r *liveRuns) forgetKept() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, kept := range r.procs {
		if kept {
			delete(r.procs, p)
		}
	}
}

// others lists the live runs but p.
func (r *liveRuns) others(p *process) []*process {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := make([]*process, 0, len(r.procs))
	for other := range r.procs {
		if other != p {
			list = append(list, other)
		}
	}
	return list
}

// procEntry is a process as /proc/N/stat shows it.
type procEntry struct {
	pid, ppid, pgrp, sid int
	state                byte
}

// scanProcesses lists every process of the sandbox but the agent itself, zombies excepted
// (they are dead; their parent or the reaper collects them).
func scanProcesses() []procEntry {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	list := make([]procEntry, 0, len(entries))
	for _, entry := range entries {
		if e, ok := liveProcess(entry, self); ok {
			list = append(list, e)
		}
	}
	return list
}

// liveProcess reads the /proc entry of a process other than self that has not ended.
func liveProcess(entry os.DirEntry, self int) (procEntry, bool) {
	pid, err := strconv.Atoi(entry.Name())
	if err != nil || pid == self {
		return procEntry{}, false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
	if err != nil {
		return procEntry{}, false
	}
	e, ok := parseStat(pid, stat)
	return e, ok && e.state != 'Z' && e.state != 'X'
}

// parseStat reads state, parent, group and session from /proc/N/stat ("pid (comm) state ppid
// pgrp session ..."; comm may hold spaces and parentheses, so the fields are counted from the
// last ')').
func parseStat(pid int, stat []byte) (procEntry, bool) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return procEntry{}, false
	}
	fields := bytes.Fields(stat[end+1:])
	if len(fields) < 4 || len(fields[0]) != 1 {
		return procEntry{}, false
	}
	e := procEntry{pid: pid, state: fields[0][0]}
	var errs [3]error
	e.ppid, errs[0] = strconv.Atoi(string(fields[1]))
	e.pgrp, errs[1] = strconv.Atoi(string(fields[2]))
	e.sid, errs[2] = strconv.Atoi(string(fields[3]))
	return e, errs[0] == nil && errs[1] == nil && errs[2] == nil
}

// parentOf is the parent pid of a /proc/N/stat line (0 when it does not parse).
func parentOf(stat []byte) int {
	e, _ := parseStat(0, stat)
	return e.ppid
}

// members are the processes of p among list: its group and session, the orphans no other live
// run claims, and every descendant of those.
func (p *process) members(list []procEntry, others []*process) map[int]bool {
	member := map[int]bool{}
	for _, e := range list {
		if p.owns(e, member, others) {
			member[e.pid] = true
		}
	}
	p.addDescendants(list, member, nil)
	return member
}

// owns says whether e is p's by itself or by a parent already known to be (member).
func (p *process) owns(e procEntry, member map[int]bool, others []*process) bool {
	switch {
	case e.pid == p.pid || e.pgrp == p.pid || e.sid == p.pid || member[e.ppid]:
		return true
	case e.ppid == os.Getpid() && !children.started(e.pid):
		return !claimed(e, others)
	}
	return false
}

// addDescendants adds to member every process of list that descends from one, to a fixed point
// (a parent may be listed after its child), calling found for each one it adds.
func (p *process) addDescendants(list []procEntry, member map[int]bool, found func(procEntry)) {
	for grew := true; grew; {
		grew = false
		for _, e := range list {
			if !member[e.pid] && member[e.ppid] {
				member[e.pid] = true
				grew = true
				if found != nil {
					found(e)
				}
			}
		}
	}
}

// A listing that takes longer than freezeAfter, or that starts with more than freezeAbove
// processes, first stops every process of the sandbox at once (kill(-1, SIGSTOP), one system
// call): with hundreds of busy processes, each of the agent's reads waits its turn for the CPU,
// and one listing took seconds under gVisor.
const (
	freezeAfter = 50 * time.Millisecond
	freezeAbove = 64
)

// mayFreezeAll says whether kill(-1) reaches the sandbox alone: only for PID 1 of the sandbox's
// own PID namespace. Anywhere else (the agent's tests on a host) it would stop every process the
// user may signal, the machine's services included, so there the rounds stop p's one by one.
func mayFreezeAll() bool {
	return os.Getpid() == 1
}

// stopRound SIGSTOPs every process of p that still runs, each as soon as the listing shows it to
// be p's (so that the CPU goes back to the agent while it lists the rest), and says how many it
// stopped. A listing slower than freezeAfter stops every process (*frozen is then true): the
// caller continues the others once p's are known.
func (p *process) stopRound(others []*process, frozen *bool) int {
	started := time.Now()
	entries, _ := os.ReadDir("/proc")
	if !*frozen && mayFreezeAll() && processEntries(entries) > freezeAbove {
		syscall.Kill(-1, syscall.SIGSTOP)
		*frozen = true
	}
	self := os.Getpid()
	member := map[int]bool{}
	list := make([]procEntry, 0, len(entries))
	stopped := 0
	stop := func(e procEntry) {
		if e.state != 'T' && e.state != 't' {
			syscall.Kill(e.pid, syscall.SIGSTOP)
			stopped++
		}
	}
	for _, entry := range entries {
		if !*frozen && mayFreezeAll() && time.Since(started) > freezeAfter {
			syscall.Kill(-1, syscall.SIGSTOP)
			*frozen = true
		}
		e, ok := liveProcess(entry, self)
		if !ok {
			continue
		}
		list = append(list, e)
		if p.owns(e, member, others) {
			member[e.pid] = true
			stop(e)
		}
	}
	p.addDescendants(list, member, stop)
	return stopped
}

// claimed says whether another live run owns the orphan e: its group or session is that run's,
// or its environment carries that run's tag.
func claimed(e procEntry, others []*process) bool {
	if len(others) == 0 {
		return false
	}
	for _, other := range others {
		if e.pgrp == other.pid || e.sid == other.pid {
			return true
		}
	}
	environ := environOf(e.pid)
	for _, other := range others {
		if bytes.Contains(environ, []byte(tagVar+"="+other.tag+"\x00")) {
			return true
		}
	}
	return false
}

// environOf reads /proc/N/environ. Root may not read another user's without CAP_SYS_PTRACE,
// which no profile grants; where threads have credentials of their own (Linux), the read runs
// again on a thread whose filesystem uid and gid are the process's owner's, which the kernel
// checks instead. nil when neither works (gVisor shows every environment to root anyway).
func environOf(pid int) []byte {
	path := filepath.Join("/proc", strconv.Itoa(pid), "environ")
	environ, err := os.ReadFile(path)
	if err == nil || !os.IsPermission(err) || !perThreadCredentials() {
		return environ
	}
	var st syscall.Stat_t
	if syscall.Stat(filepath.Dir(path), &st) != nil {
		return nil
	}
	result := make(chan []byte, 1)
	go func() {
		runtime.LockOSThread()
		if setFsIDs(st.Uid, st.Gid) != nil {
			if setFsIDs(0, 0) == nil {
				runtime.UnlockOSThread()
			}
			result <- nil
			return
		}
		data, _ := os.ReadFile(path)
		if setFsIDs(0, 0) == nil {
			runtime.UnlockOSThread()
		}
		result <- data
	}()
	return <-result
}

// setFsIDs sets the calling thread's filesystem gid, then uid, and checks that both took: both
// calls return the previous value rather than an error.
func setFsIDs(uid, gid uint32) error {
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	// An id of -1 is invalid, so the call changes nothing and returns the current one.
	nowGid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	nowUid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if uint32(nowUid) != uid || uint32(nowGid) != gid {
		return errCredentials
	}
	return nil
}

// processEntries is how many entries of /proc name a process.
func processEntries(entries []os.DirEntry) int {
	n := 0
	for _, entry := range entries {
		if name := entry.Name(); name != "" && name[0] >= '0' && name[0] <= '9' {
			n++
		}
	}
	return n
}

// killTree ends every process of the command (members). It first stops them (SIGSTOP), round
// after round until a listing shows none running: a stopped process forks no more and leaves the
// CPU to the agent, which a fork bomb otherwise shares with hundreds of busy processes (under
// gVisor a listing then took seconds, and what was killed was replaced before the next round).
// Then it SIGKILLs them, round after round until a listing finds none. What a process forks
// between a listing and its signal is its child, found by the next round. The agent holds
// CAP_KILL (or is root with every capability), so it signals any user's processes itself, and it
// forks nothing, so it works while a fork bomb holds the pids limit.
func (p *process) killTree() {
	deadline := time.Now().Add(killTreeLimit)
	frozen := false
	for {
		syscall.Kill(-p.pid, syscall.SIGSTOP)
		stopped := gated(func() int { return p.stopRound(runs.others(p), &frozen) })
		if stopped == 0 || time.Now().After(deadline) {
			break
		}
	}
	if frozen {
		// Everything was stopped: the processes that are not p's go on (a process its user had
		// stopped goes on too; job control stops it again when it needs its terminal).
		gated(func() int {
			list := scanProcesses()
			members := p.members(list, runs.others(p))
			for _, e := range list {
				if !members[e.pid] {
					syscall.Kill(e.pid, syscall.SIGCONT)
				}
			}
			return 0
		})
	}
	for {
		left := gated(func() int {
			syscall.Kill(-p.pid, syscall.SIGKILL)
			members := p.members(scanProcesses(), runs.others(p))
			for pid := range members {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return len(members)
		})
		if left == 0 || time.Now().After(deadline) {
			return
		}
		// Collect the killed orphans, so that the next listing does not wait for the reaper.
		children.reapAll()
	}
}

// gated runs one round of listing and signalling with no fork of the agent under way (forkGate).
func gated(round func() int) int {
	forkGate.Lock()
	defer forkGate.Unlock()
	return round()
}

// mayHaveSurvivors says whether a command that exited may have left processes behind, without
// the cost of killTree's listing: a survivor is in the command's process group, or descends
// from a process that was re-parented to the agent and that the agent did not start itself.
func (p *process) mayHaveSurvivors() bool {
	if err := syscall.Kill(-p.pid, 0); err != syscall.ESRCH {
		return true
	}
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err == nil && parentOf(stat) == self && !children.started(pid) {
			return true
		}
	}
	return false
}
