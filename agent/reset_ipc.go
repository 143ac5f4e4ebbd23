package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// System V IPC objects outlive the processes that made them, so a reset removes each one.
// Linux lists them in /proc/sysvipc. gVisor has no such files and no usable *_STAT commands,
// but it numbers the objects of each kind in order: a probe object made with IPC_PRIVATE gets
// the next free id, so every object in use has a lower one (unless the numbers wrapped since
// the last reset, when the whole id range is searched).

// ipcKind is one kind of System V object: its ctl system call and its /proc/sysvipc file.
type ipcKind struct {
	name string
	ctl  uintptr
	file string
	// uidColumn is the owner's column in the file.
	uidColumn int
}

var ipcKinds = []ipcKind{
	{"shm", syscall.SYS_SHMCTL, "/proc/sysvipc/shm", 7},
	{"msg", syscall.SYS_MSGCTL, "/proc/sysvipc/msg", 7},
	{"sem", syscall.SYS_SEMCTL, "/proc/sysvipc/sem", 4},
}

// ipcObject is one System V object; uid is its owner's, -1 where the agent may not read it.
type ipcObject struct {
	id  int
	uid int
}

const (
	ipcRMID    = 0
	ipcStat    = 2
	ipcPrivate = 0
	ipcCreat   = 0o1000
	// ipcMaxID: ids are below this (IPCMNI) where numbers are not Linux's index-and-sequence.
	ipcMaxID = 32768
)

// cleanBelow is, per kind (gVisor only), an id below which no object existed at the last reset
// that left none: objects made since then have ids from it up to the next probe's.
var cleanBelow = map[string]int{}

// objects lists every object of the kind, and (gVisor) the probe's id (-1 on Linux).
func (k ipcKind) objects() ([]ipcObject, int) {
	if data, err := os.ReadFile(k.file); err == nil {
		var objects []ipcObject
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > k.uidColumn {
				id, err := strconv.Atoi(fields[1])
				uid, uidErr := strconv.Atoi(fields[k.uidColumn])
				if err == nil && uidErr == nil {
					objects = append(objects, ipcObject{id, uid})
				}
			}
		}
		return objects, -1
	}
	from, next := cleanBelow[k.name], k.probe()
	if next < from {
		// The numbers wrapped: an object may hold any id.
		from, next = 0, ipcMaxID
	}
	var objects []ipcObject
	for id := from; id < next && id < ipcMaxID; id++ {
		if uid, ok := k.stat(id); ok {
			objects = append(objects, ipcObject{id, uid})
		}
	}
	return objects, next
}

// probe makes and removes an object of the kind and returns its id: the next free one.
func (k ipcKind) probe() int {
	var id uintptr
	var errno syscall.Errno
	switch k.name {
	case "shm":
		id, _, errno = syscall.RawSyscall(syscall.SYS_SHMGET, ipcPrivate, 4096, ipcCreat|0o600)
	case "msg":
		id, _, errno = syscall.RawSyscall(syscall.SYS_MSGGET, ipcPrivate, ipcCreat|0o600, 0)
	default:
		id, _, errno = syscall.RawSyscall6(syscall.SYS_SEMGET, ipcPrivate, 1, ipcCreat|0o600, 0, 0, 0)
	}
	if errno != 0 {
		// No probe: search the whole range.
		return ipcMaxID
	}
	k.remove(int(id))
	return int(id)
}

// stat says whether an object holds id, and its owner's uid (-1 when IPC_STAT is refused for
// want of permission; a free id is EINVAL). The owner is the first uid of struct ipc64_perm,
// after the 4-byte key.
func (k ipcKind) stat(id int) (int, bool) {
	var buf [256]byte
	var errno syscall.Errno
	if k.name == "sem" {
		_, _, errno = syscall.RawSyscall6(k.ctl, uintptr(id), 0, ipcStat, uintptr(unsafe.Pointer(&buf[0])), 0, 0)
	} else {
		_, _, errno = syscall.RawSyscall(k.ctl, uintptr(id), ipcStat, uintptr(unsafe.Pointer(&buf[0])))
	}
	switch errno {
	case 0:
		return int(*(*uint32)(unsafe.Pointer(&buf[4]))), true
	case syscall.EACCES, syscall.EPERM:
		return -1, true
	}
	return 0, false
}

// remove is IPC_RMID; only the owner, the creator or CAP_SYS_ADMIN may.
func (k ipcKind) remove(id int) error {
	var errno syscall.Errno
	if k.name == "sem" {
		_, _, errno = syscall.RawSyscall6(k.ctl, uintptr(id), 0, ipcRMID, 0, 0, 0)
	} else {
		_, _, errno = syscall.RawSyscall(k.ctl, uintptr(id), ipcRMID, 0)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// removeIPC removes every System V object: root's as the agent, the others as the default
// user (`sandboxd-agent ipc-remove`), since the agent holds no CAP_SYS_ADMIN to remove another
// user's. The agent never tries on another user's object: gVisor answers such an IPC_RMID with
// success and leaves the object behind, a semaphore set even beyond its owner's reach.
func removeIPC(defaultUser string) {
	var left []string
	for _, kind := range ipcKinds {
		objects, _ := kind.objects()
		for _, object := range objects {
			if object.uid != 0 || kind.remove(object.id) != nil {
				left = append(left, fmt.Sprintf("%s:%d", kind.name, object.id))
			}
		}
	}
	if len(left) == 0 {
		return
	}
	id, err := resolveUser("", defaultUser)
	if err != nil || id.uid == 0 {
		return
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: append([]string{"sandboxd-agent", "ipc-remove"}, left...)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}}
	if _, done, err := startCmd(cmd); err == nil {
		<-done
	}
}

// ipcLeftovers names the System V objects that exist.
func ipcLeftovers() []string {
	var out []string
	for _, kind := range ipcKinds {
		objects, next := kind.objects()
		for _, object := range objects {
			out = append(out, fmt.Sprintf("System V %s %d (uid %d)", kind.name, object.id, object.uid))
		}
		if len(objects) == 0 && next >= 0 && next < ipcMaxID {
			cleanBelow[kind.name] = next
		}
	}
	return out
}

// ipcRemoveCommand is `sandboxd-agent ipc-remove KIND:ID...`: IPC_RMID as the calling user.
func ipcRemoveCommand(args []string) int {
	code := 0
	for _, arg := range args {
		name, number, _ := strings.Cut(arg, ":")
		id, err := strconv.Atoi(number)
		for _, kind := range ipcKinds {
			if kind.name == name && err == nil {
				if err := kind.remove(id); err != nil {
					fmt.Fprintf(os.Stderr, "sandboxd-agent ipc-remove %s: %v\n", arg, err)
					code = 1
				}
			}
		}
	}
	return code
}
