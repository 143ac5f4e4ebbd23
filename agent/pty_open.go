package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// A terminal belongs to its user, as login and sshd make it: the shell's user may reopen it (tty,
// sudo, ssh, `mesg`), and other users may not write to it. The kernel gives a new pseudo-terminal
// the filesystem uid of whoever opens /dev/ptmx, and the agent, root without CAP_CHOWN in the
// restrictive profile, could not chown it afterwards (it stayed root's). So for a user other
// than root the pair is opened by `sandboxd-agent open-pty`, run as that user, which hands both
// descriptors back over a socket pair (SCM_RIGHTS) and exits.

// openPtyAs opens a pseudo-terminal pair owned by id (openPty for root).
func openPtyAs(id identity) (master, slave *os.File, err error) {
	if id.uid == 0 {
		return openPty()
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	ours := os.NewFile(uintptr(pair[0]), "pty-socket")
	theirs := os.NewFile(uintptr(pair[1]), "pty-socket")
	defer ours.Close()
	var stderr bytes.Buffer
	// The child's descriptor 3 is its end of the pair.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"sandboxd-agent", "open-pty"}, ExtraFiles: []*os.File{theirs}, Stderr: &stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}}
	err = runInternal(cmd)
	theirs.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a terminal as %s: %w", id.name, err)
	}
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(2*4))
	_, oobn, _, _, err := syscall.Recvmsg(pair[0], buf, oob, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a terminal as %s: %w", id.name, err)
	}
	messages, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(messages) != 1 {
		return nil, nil, fmt.Errorf("opening a terminal as %s: %s", id.name, bytes.TrimSpace(stderr.Bytes()))
	}
	fds, err := syscall.ParseUnixRights(&messages[0])
	if err != nil || len(fds) != 2 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil, fmt.Errorf("opening a terminal as %s: %d descriptors received", id.name, len(fds))
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return os.NewFile(uintptr(fds[0]), "/dev/ptmx"), os.NewFile(uintptr(fds[1]), "pts"), nil
}

// openPtyCommand is `sandboxd-agent open-pty`: it opens a pseudo-terminal pair as the calling
// user and sends both descriptors over descriptor 3.
func openPtyCommand(args []string) int {
	master, slave, err := openPty()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-agent: open-pty:", err)
		return 1
	}
	rights := syscall.UnixRights(int(master.Fd()), int(slave.Fd()))
	if err := syscall.Sendmsg(3, []byte{0}, rights, nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-agent: open-pty:", err)
		return 1
	}
	return 0
}
