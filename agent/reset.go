package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A reusable sandbox runs one fast run after another. Its root filesystem is read-only, so
// everything a run can change is in the writable mounts, the processes, the System V and
// POSIX IPC objects and the agent's own limits. POST /v1/baseline records all of that once the
// server has set the sandbox up, before any run; POST /v1/reset brings the sandbox back to
// it: it kills every
// other process, removes every IPC object, restores every writable mount to its recorded tree
// and the agent's limits to their values, then checks each of these again. Only a sandbox whose
// check finds nothing is reused; the server discards one whose reset fails.

// resetBaseline is the state a reset returns to.
type resetBaseline struct {
	mounts   []*mountTree
	rlimits  map[int]syscall.Rlimit
	nice     int
	oomScore string
	hostname string
	// sockets bound when the baseline was taken, which no command made: the engine's own, such
	// as Docker's embedded DNS resolver on 127.0.0.11 in a user-defined network's namespace.
	sockets map[string]bool
}

// rlimitNames are the limits a command could lower on the agent (prlimit on PID 1, as root).
var rlimitNames = map[int]string{
	syscall.RLIMIT_AS: "as", syscall.RLIMIT_CORE: "core", syscall.RLIMIT_CPU: "cpu", syscall.RLIMIT_DATA: "data",
	syscall.RLIMIT_FSIZE: "fsize", syscall.RLIMIT_NOFILE: "nofile", syscall.RLIMIT_STACK: "stack",
	6 /* NPROC */ : "nproc", 8 /* MEMLOCK */ : "memlock", 10 /* LOCKS */ : "locks", 11 /* SIGPENDING */ : "sigpending",
	12 /* MSGQUEUE */ : "msgqueue", 13 /* NICE */ : "nice", 14 /* RTPRIO */ : "rtprio", 15 /* RTTIME */ : "rttime",
}

// captureBaseline records the sandbox as it is now.
func captureBaseline() (*resetBaseline, error) {
	mounts, err := writableMounts()
	if err != nil {
		return nil, err
	}
	b := &resetBaseline{rlimits: map[int]syscall.Rlimit{}}
	for _, m := range mounts {
		tree, err := recordTree(m)
		if err != nil {
			return nil, fmt.Errorf("recording %s: %w", m, err)
		}
		b.mounts = append(b.mounts, tree)
	}
	for resource := range rlimitNames {
		var limit syscall.Rlimit
		if syscall.Getrlimit(resource, &limit) == nil {
			b.rlimits[resource] = limit
		}
	}
	b.nice, _ = syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	b.oomScore = readTrimmed("/proc/self/oom_score_adj")
	b.hostname, _ = os.Hostname()
	b.sockets = map[string]bool{}
	for _, socket := range listeningSockets() {
		b.sockets[socket] = true
	}
	return b, nil
}

// commandCloneflags are the namespaces each command starts in a new one of (see baselineRequest).
var commandCloneflags uintptr

// baselineRequest is the body of POST /v1/baseline (optional).
type baselineRequest struct {
	// IPCNamespacePerCommand: every command starts in a new IPC namespace, which goes with the
	// command's last process, and with it every System V and POSIX IPC object the command made.
	// gVisor needs it: it does not mount the mqueue filesystem, so POSIX message queues cannot
	// be listed there. It takes CAP_SYS_ADMIN, which the agent must hold (gVisor's own, checked
	// by its kernel alone); commands never keep it (see capabilities.go).
	IPCNamespacePerCommand bool `json:"ipc_namespace_per_command"`
}

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

// handleBaseline is POST /v1/baseline: records the state resets return to, once; 409 when one
// is recorded already or the sandbox cannot be reset (a writable root filesystem, or an IPC
// namespace per command asked for without CAP_SYS_ADMIN).
func (a *agent) handleBaseline(w http.ResponseWriter, r *http.Request) {
	var req baselineRequest
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, &req); err != nil {
			writeError(w, http.StatusBadRequest, "baseline request: "+err.Error())
			return
		}
	}
	a.resetMu.Lock()
	defer a.resetMu.Unlock()
	if a.baseline != nil {
		writeError(w, http.StatusConflict, "a baseline is recorded already")
		return
	}
	if req.IPCNamespacePerCommand {
		if !hasEffectiveCapability(capSysAdmin) {
			writeError(w, http.StatusConflict, "an IPC namespace per command needs CAP_SYS_ADMIN, which the agent does not hold")
			return
		}
		commandCloneflags = syscall.CLONE_NEWIPC
	}
	baseline, err := captureBaseline()
	if err != nil {
		writeError(w, http.StatusConflict, "this sandbox cannot be reused: "+err.Error())
		return
	}
	a.baseline = baseline
	writeJSON(w, http.StatusOK, map[string]interface{}{"mounts": len(baseline.mounts)})
}

// handleReset is POST /v1/reset: 200 when the sandbox is back to its baseline, 409 with what
// is left over otherwise (the sandbox must not be reused) or when no baseline was recorded.
func (a *agent) handleReset(w http.ResponseWriter, r *http.Request) {
	a.resetMu.Lock()
	defer a.resetMu.Unlock()
	if a.baseline == nil {
		writeError(w, http.StatusConflict, "no baseline recorded: POST /v1/baseline first")
		return
	}
	started := time.Now()
	if leftovers := a.reset(); len(leftovers) > 0 {
		writeJSON(w, http.StatusConflict, map[string]interface{}{"error": "the sandbox could not be reset", "leftovers": leftovers})
		return
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"duration_us": time.Since(started).Microseconds()})
}

// reset brings the sandbox back to the baseline and says what it could not (nothing when it is
// pristine again).
func (a *agent) reset() []string {
	var leftovers []string
	// Workers first: each is marked stopped without a kill of its own, which could fork a
	// helper that the check below would find; killOthers ends them with everything else.
	a.workers.clear(false)
	if pids := killOthers(); len(pids) > 0 {
		// Nothing else is checked while a process runs: it could undo what the reset does.
		return []string{"processes still running: " + strings.Join(pids, ", ")}
	}
	a.detached = newDetachedTable()
	runs.forgetKept()
	removeIPC(a.defaultUser)
	for _, tree := range a.baseline.mounts {
		tree.restore(a.defaultUser)
	}
	a.restoreLimits()
	// The check: everything again, from scratch.
	leftovers = append(leftovers, ipcLeftovers()...)
	for _, tree := range a.baseline.mounts {
		leftovers = append(leftovers, tree.differences()...)
	}
	leftovers = append(leftovers, a.limitDifferences()...)
	for _, socket := range listeningSockets() {
		if !a.baseline.sockets[socket] {
			leftovers = append(leftovers, socket)
		}
	}
	if pids := otherProcesses(); len(pids) > 0 {
		leftovers = append(leftovers, "processes: "+strings.Join(pids, ", "))
	}
	return leftovers
}

// killOthers SIGKILLs every process of the sandbox but the agent (kill(-1) from PID 1 reaches
// all of them, whatever their user, group or session) until none is left or a second passed;
// it returns those still there. The reaper collects the zombies.
func killOthers() []string {
	deadline := time.Now().Add(time.Second)
	for {
		pids := otherProcesses()
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		gated(func() int {
			syscall.Kill(-1, syscall.SIGKILL)
			return 0
		})
		children.reapAll()
		time.Sleep(2 * time.Millisecond)
	}
}

// otherProcesses lists the pids of the sandbox other than the agent's.
func otherProcesses() []string {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []string
	for _, entry := range entries {
		if pid, err := strconv.Atoi(entry.Name()); err == nil && pid != self {
			pids = append(pids, entry.Name())
		}
	}
	return pids
}

// restoreLimits sets the agent's limits, nice value and OOM score back where a command with
// the right to lower them did; raising some back needs privileges the agent lacks, which the
// check then reports.
func (a *agent) restoreLimits() {
	for resource, limit := range a.baseline.rlimits {
		var now syscall.Rlimit
		if syscall.Getrlimit(resource, &now) == nil && now != limit {
			syscall.Setrlimit(resource, &limit)
		}
	}
	if nice, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil && nice != a.baseline.nice {
		syscall.Setpriority(syscall.PRIO_PROCESS, 0, a.baseline.nice)
	}
	if a.baseline.oomScore != "" && readTrimmed("/proc/self/oom_score_adj") != a.baseline.oomScore {
		os.WriteFile("/proc/self/oom_score_adj", []byte(a.baseline.oomScore), 0)
	}
}

func (a *agent) limitDifferences() []string {
	var out []string
	for resource, limit := range a.baseline.rlimits {
		var now syscall.Rlimit
		if syscall.Getrlimit(resource, &now) == nil && now != limit {
			out = append(out, fmt.Sprintf("rlimit %s is %d/%d, not %d/%d", rlimitNames[resource], now.Cur, now.Max, limit.Cur, limit.Max))
		}
	}
	if nice, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil && nice != a.baseline.nice {
		out = append(out, fmt.Sprintf("nice value changed (%d, not %d)", nice, a.baseline.nice))
	}
	if now := readTrimmed("/proc/self/oom_score_adj"); now != a.baseline.oomScore {
		out = append(out, fmt.Sprintf("oom_score_adj is %s, not %s", now, a.baseline.oomScore))
	}
	if host, _ := os.Hostname(); host != a.baseline.hostname {
		out = append(out, "hostname changed to "+host)
	}
	return out
}

// listeningSockets names the TCP sockets in LISTEN state and the bound UDP sockets in the
// sandbox's network namespace; a reset reports those the baseline did not hold (none survive
// their processes; this checks that).
func listeningSockets() []string {
	var out []string
	for _, table := range []struct {
		file  string
		state string
	}{{"/proc/net/tcp", "0A"}, {"/proc/net/tcp6", "0A"}, {"/proc/net/udp", ""}, {"/proc/net/udp6", ""}} {
		data, err := os.ReadFile(table.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 3 && (table.state == "" || fields[3] == table.state) {
				out = append(out, table.file+" "+fields[1])
			}
		}
	}
	return out
}

// hasEffectiveCapability reads the agent's effective capability set.
func hasEffectiveCapability(bit uint) bool {
	for _, line := range strings.Split(readTrimmed("/proc/self/status"), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			set, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "CapEff:")), 16, 64)
			return err == nil && set&(1<<bit) != 0
		}
	}
	return false
}

func readTrimmed(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
