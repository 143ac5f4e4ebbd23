// Command sandboxd-agent runs inside every sandbox as PID 1. It reaps zombies and serves exec,
// files, detached processes and workers over a Unix socket, so that the service reaches a sandbox in
// about the cost of a process spawn instead of an Engine API exec.
//
// Usage: sandboxd-agent serve --socket PATH [--user USER] [--workspace DIR] [--drop-caps] [--max-procs N] [--memory-guard BYTES] [--memory-headroom BYTES] [--mask-proc] [--drop-sys-admin]
//
//	sandboxd-agent file read|write|delete|mkdir PATH   (internal: a file operation as the
//	                                                     calling user, started by the agent)
//	sandboxd-agent drop-caps PATH ARGV0 ARGS...        (internal: exec PATH without capabilities)
//	sandboxd-agent open-pty                            (internal: open a terminal as the calling user)
//	sandboxd-agent wipe PATH...                        (internal: remove paths as the calling user)
//	sandboxd-agent remove-xattrs PATH NAME...          (internal: remove attributes as the calling user)
//	sandboxd-agent ipc-remove KIND:ID...               (internal: remove System V objects as the calling user)
//	sandboxd-agent set-immutable on|off PATH...        (run by the host: seal what a sandbox mounts)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

const version = "1"

type agent struct {
	defaultUser string
	// userError says why the default user does not resolve in this sandbox ("" when it does).
	userError string
	// dropCaps: commands that run as root get no capabilities (see capabilities.go).
	dropCaps bool
	// fileThreads: file operations run on threads of the agent with the user's credentials
	// (thread_credentials.go) rather than in child processes.
	fileThreads bool
	started     time.Time
	detached    *detachedTable
	workers     *workerTable
	// baseline is what POST /v1/reset returns a reusable sandbox to (nil: none recorded).
	baseline *resetBaseline
	resetMu  sync.Mutex
}

// internalCommands are the modes in which the agent re-executes itself (as /proc/self/exe) to
// act as another user or with fewer privileges.
var internalCommands = map[string]func([]string) int{
	"file":          fileCommand,
	"drop-caps":     dropCapsCommand,
	"wipe":          wipeCommand,
	"remove-xattrs": removeXattrsCommand,
	"ipc-remove":    ipcRemoveCommand,
	"sethostname":   setHostnameCommand,
	"hostnamer":     hostnamerCommand,
	"open-pty":      openPtyCommand,
	"set-immutable": setImmutableCommand,
}

// setHostnameCommand sets the hostname of the UTS namespace it runs in (`sandboxd-agent
// sethostname NAME`): the server runs it from the host inside a claimed pool instance's namespace.
// It touches no file: its mount namespace is the host's.
func setHostnameCommand(args []string) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent sethostname NAME")
		return 2
	}
	if err := syscall.Sethostname([]byte(args[0])); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-agent: sethostname:", err)
		return 1
	}
	return 0
}

// runInternalCommand exits the process with the internal command's code when args name one.
func runInternalCommand(args []string) {
	if len(args) >= 2 {
		if command, ok := internalCommands[args[1]]; ok {
			os.Exit(command(args[2:]))
		}
	}
}

func main() {
	runInternalCommand(os.Args)
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent serve --socket PATH [--user USER] [--workspace DIR] [--claim-workspace] [--drop-caps]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	socket := flags.String("socket", "/run/sandboxd/agent.sock", "Unix socket to serve on")
	user := flags.String("user", "", "default user of commands and file operations (name, uid or uid:gid)")
	dropCaps := flags.Bool("drop-caps", false, "commands that run as root start with no capabilities")
	workspace := flags.String("workspace", "", "directory made for the default user if missing; commands start in it when the image names no working directory")
	claim := flags.Bool("claim-workspace", false, "an existing workspace directory is given to the default user (an image whose default user was root may own it as anyone)")
	maxProcs := flags.Uint64("max-procs", 0, "RLIMIT_NPROC of the agent and every command (0: unchanged)")
	memoryReserve := flags.Uint64("memory-guard", 0, "kill the largest command when less than a quarter of the memory (at least this many bytes, at most half) is free (gVisor; 0: no guard)")
	headroom := flags.Uint64("memory-headroom", 0, "bytes of the memory limit that are gVisor's own kernel's: the guard treats the sandbox as having that much less (gVisor)")
	maskOwnProc := flags.Bool("mask-proc", false, "hide the agent's environ and memory maps in /proc (gVisor shows them to every user; needs CAP_SYS_ADMIN)")
	dropAdmin := flags.Bool("drop-sys-admin", false, "give up CAP_SYS_ADMIN once started (it was granted for --mask-proc alone)")
	flags.Parse(os.Args[2:])
	if *memoryReserve > 0 {
		kernelHeadroom = *headroom
		_ = startMemoryGuard(*memoryReserve)
	}
	if *maxProcs > 0 {
		if err := limitProcesses(*maxProcs); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent:", err)
			os.Exit(1)
		}
	}
	hide := procHiding{mask: *maskOwnProc, dropSysAdmin: *dropAdmin}
	if err := serve(*socket, *user, workspaceSetup{dir: *workspace, claim: *claim}, *dropCaps, hide); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-agent:", err)
		os.Exit(1)
	}
}

// serve listens on the socket (owner-only: the sandbox's unprivileged user cannot use the agent
// to act as another user) and handles requests until the process is killed. It first makes the
// OS threads it will ever need, while no command can have taken the pids (threads.go).
func serve(socket, user string, workspace workspaceSetup, dropCaps bool, hide procHiding) error {
	if err := hideEnvironment(); err != nil {
		return fmt.Errorf("moving the environment out of /proc/1/environ: %w", err)
	}
	// After the execve of hideEnvironment, which makes a process dumpable again.
	if err := makeNonDumpable(); err != nil {
		return err
	}
	// The probe of per-thread credentials ends a thread of its own: before the reserve is made.
	a := newAgent(user, workspace, dropCaps)
	reserveThreads(reservedThreads)
	// Once every reserved thread exists: each one is hidden too.
	if hide.mask {
		if err := maskProc(); err != nil {
			return err
		}
	}
	if hide.dropSysAdmin {
		if err := dropSysAdmin(); err != nil {
			return fmt.Errorf("dropping CAP_SYS_ADMIN: %w", err)
		}
	}
	go children.run()
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return err
	}
	os.Remove(socket)
	old := syscall.Umask(0o177)
	listener, err := net.Listen("unix", socket)
	syscall.Umask(old)
	if err != nil {
		return err
	}
	return http.Serve(listener, a.routes())
}

// procHiding is what the agent does at start to hide itself from the sandbox's /proc (proc_mask.go).
type procHiding struct {
	mask         bool
	dropSysAdmin bool
}

// rlimitNproc is RLIMIT_NPROC (the syscall package of Go 1.19 does not name it).
const rlimitNproc = 6

// limitProcesses sets RLIMIT_NPROC, which every command inherits. The Docker backend passes it
// under gVisor: there the host's pids limit counts the sandbox kernel's own threads (about
// eight per process the sandbox runs), and when they reach it the whole sandbox dies, so the
// processes are bounded inside it first, where a fork past the bound fails with EAGAIN.
func limitProcesses(max uint64) error {
	limit := syscall.Rlimit{Cur: max, Max: max}
	if err := syscall.Setrlimit(rlimitNproc, &limit); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_NPROC, %d): %w", max, err)
	}
	return nil
}

// makeNonDumpable keeps the sandbox's commands out of the agent: /proc/1/environ, maps, mem and
// fd of a non-dumpable process belong to root and need CAP_SYS_PTRACE, which no profile grants.
// (gVisor's /proc ignores the flag for environ and maps: see hideEnvironment.) Commands are not
// affected: execve makes each of them dumpable again.
func makeNonDumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}

// workspaceSetup is the --workspace directory, and whether an existing one is claimed for the
// default user.
type workspaceSetup struct {
	dir   string
	claim bool
}

// newAgent resolves the default user once: if it does not resolve, every request as that user
// fails, and health says why (the backend refuses such an image at create). Otherwise it sets
// up the workspace.
func newAgent(user string, workspace workspaceSetup, dropCaps bool) *agent {
	a := &agent{defaultUser: user, dropCaps: dropCaps, fileThreads: perThreadCredentials(), started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}
	owner, err := resolveUser("", user)
	if err != nil {
		a.userError = err.Error()
		fmt.Fprintln(os.Stderr, "sandboxd-agent: default user:", err)
	} else if workspace.dir != "" {
		if err := enterWorkspace(workspace.dir, owner, workspace.claim); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent: workspace:", err)
		}
	}
	return a
}

func (a *agent) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/health", a.handleHealth)
	mux.HandleFunc("/v1/exec", post(a.handleExec))
	mux.HandleFunc("/v1/files", a.handleFiles)
	mux.HandleFunc("/v1/archive", a.handleArchive)
	mux.HandleFunc("/v1/detached", a.handleDetachedList)
	mux.HandleFunc("/v1/detached/", a.handleDetachedItem)
	mux.HandleFunc("/v1/workers", a.handleWorkerList)
	mux.HandleFunc("/v1/workers/", a.handleWorkerItem)
	mux.HandleFunc("/v1/baseline", post(a.handleBaseline))
	mux.HandleFunc("/v1/reset", post(a.handleReset))
	mux.HandleFunc("/v1/hostname", post(a.handleHostname))
	mux.HandleFunc("/v1/fs/watch", a.handleWatch)
	mux.HandleFunc("/v1/fs/watches", a.handleWatchCount)
	mux.HandleFunc("/v1/pty", post(a.handlePty))
	mux.HandleFunc("/v1/ports/", a.handlePortRelay)
	return mux
}

func (a *agent) handleHealth(w http.ResponseWriter, r *http.Request) {
	health := map[string]interface{}{
		"version":        version,
		"pid":            os.Getpid(),
		"default_user":   a.defaultUser,
		"uptime_seconds": int(time.Since(a.started).Seconds()),
	}
	if a.userError != "" {
		health["default_user_error"] = a.userError
	}
	writeJSON(w, http.StatusOK, health)
}

// enterWorkspace makes dir, owned by the default user, unless it exists (an image's own
// directory or a tmpfs keeps its owner, unless `claim`: then the directory itself, not what it
// holds, is given to the default user), and makes it the agent's working directory, which
// commands inherit, when the agent started in / (the image names no working directory).
func enterWorkspace(dir string, owner identity, claim bool) error {
	if info, err := os.Lstat(dir); os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chown(dir, int(owner.uid), int(owner.gid)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else if st, ok := info.Sys().(*syscall.Stat_t); claim && info.IsDir() && ok && (st.Uid != owner.uid || st.Gid != owner.gid) {
		// Best effort: a profile without CAP_CHOWN keeps the owner (its tmpfs is made for the user).
		if err := os.Lchown(dir, int(owner.uid), int(owner.gid)); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent: workspace:", err)
		}
	}
	if cwd, err := os.Getwd(); err != nil || cwd != "/" {
		return err
	}
	return os.Chdir(dir)
}

// post restricts a handler to POST.
func post(handler http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		handler(w, r)
	}
}

// decodeBody reads a JSON body to its end: Go's server notices a client that went away only
// once the request body is consumed, and exec relies on that to kill the command.
func decodeBody(w http.ResponseWriter, r *http.Request, value interface{}) error {
	body := http.MaxBytesReader(w, r.Body, maxRequestBytes)
	if err := json.NewDecoder(body).Decode(value); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, body)
	return err
}

func writeJSON(w http.ResponseWriter, status int, value interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	encoder := json.NewEncoder(w)
	// A worker's answer line is passed on as it is: no \u003c for every '<' it holds.
	encoder.SetEscapeHTML(false)
	encoder.Encode(value)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}
