package main

import (
	"net/http"
	"os"
	"syscall"
	"unsafe"
)

// A claimed warm-pool instance takes the sandbox's name as its hostname. Under runc the host sets
// it from the container's UTS namespace (`sethostname`, main.go); a gVisor sandbox's namespace
// lives in gVisor's kernel, out of the host's reach, so its agent sets it: the agent of a gVisor
// pool instance starts with gVisor's CAP_SYS_ADMIN (a capability of gVisor's kernel, which the
// host never sees; commands never hold it: a change of uid clears it, and root commands go
// through --drop-caps), sets the name once, and then gives the capability up on every thread
// unless its resets need it (an IPC namespace per command, reset.go).

// hostname is the UTS name now, for $HOSTNAME of each command: the engine set the variable in the
// agent's own environment to the name the container was made with, which a claim changes.
func hostname() string {
	name, err := os.Hostname()
	if err != nil {
		return os.Getenv("HOSTNAME")
	}
	return name
}

type hostnameRequest struct {
	Name string `json:"name"`
}

// handleHostname is POST /v1/hostname: sets the hostname, then drops CAP_SYS_ADMIN; 409 when the
// agent does not hold it (a hostname is set once, at the claim).
func (a *agent) handleHostname(w http.ResponseWriter, r *http.Request) {
	var req hostnameRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "hostname request: "+err.Error())
		return
	}
	if req.Name == "" || len(req.Name) > 64 {
		writeError(w, http.StatusBadRequest, "name: must be 1-64 bytes")
		return
	}
	if !hasEffectiveCapability(capSysAdmin) {
		writeError(w, http.StatusConflict, "setting the hostname needs CAP_SYS_ADMIN, which the agent does not hold")
		return
	}
	if err := syscall.Sethostname([]byte(req.Name)); err != nil {
		writeError(w, http.StatusInternalServerError, "sethostname: "+err.Error())
		return
	}
	a.resetMu.Lock()
	keep := commandCloneflags != 0
	a.resetMu.Unlock()
	if !keep {
		if err := dropSysAdmin(); err != nil {
			writeError(w, http.StatusInternalServerError, "dropping CAP_SYS_ADMIN: "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"hostname": req.Name})
}

// dropSysAdmin removes CAP_SYS_ADMIN from the effective and permitted sets of every thread of the
// agent (capabilities are per thread; capset(2), version 3).
func dropSysAdmin() error {
	header := struct {
		version uint32
		pid     int32
	}{version: 0x20080522}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	mask := ^uint32(1 << (capSysAdmin % 32))
	word := capSysAdmin / 32
	data[word].effective &= mask
	data[word].permitted &= mask
	data[word].inheritable &= mask
	header.pid = 0
	_, _, errno := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
