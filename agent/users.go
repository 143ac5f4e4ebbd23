package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// identity is who a command runs as, resolved inside the sandbox from its /etc/passwd and
// /etc/group (any image: there may be no libc, no `id`, no NSS, not even an /etc/passwd).
type identity struct {
	uid, gid uint32
	groups   []uint32
	name     string
	home     string
}

// The account databases; variables so that tests can point them at their own files.
var (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// resolveUser accepts "", "root", a name, a uid, or "user:group" (names or numbers), like
// Docker's --user. "" means the sandbox's default user. As in Docker, a uid that /etc/passwd
// does not list runs with gid 0 and HOME=/. Unlike Docker, "root" needs no /etc/passwd entry:
// it is uid 0 in every image, so sudo works in images that have no account database at all.
func resolveUser(spec, fallback string) (identity, error) {
	if spec == "" {
		spec = fallback
	}
	if spec == "" {
		spec = "0"
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	id := identity{home: "/"}
	if entry, ok := lookupPasswd(userPart); ok {
		id.uid, id.gid, id.name, id.home = entry.uid, entry.gid, entry.name, entry.home
	} else if userPart == "root" {
		id.name = "root"
	} else if n, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		id.uid, id.name = uint32(n), userPart
		if n == 0 {
			id.name = "root"
		}
	} else {
		return id, fmt.Errorf("unknown user %q: not in this sandbox's %s", userPart, passwdFile)
	}
	if hasGroup {
		gid, ok := lookupGroup(groupPart)
		if !ok {
			return id, fmt.Errorf("unknown group %q: not in this sandbox's %s", groupPart, groupFile)
		}
		id.gid = gid
	}
	id.groups = supplementaryGroups(id.name, id.gid)
	return id, nil
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

func lookupPasswd(nameOrUID string) (passwdEntry, bool) {
	var found passwdEntry
	ok := scanColonFile(passwdFile, func(f []string) bool {
		if len(f) < 6 || (f[0] != nameOrUID && f[2] != nameOrUID) {
			return false
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return false
		}
		found = passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]}
		return true
	})
	return found, ok
}

func lookupGroup(nameOrGID string) (uint32, bool) {
	if n, err := strconv.ParseUint(nameOrGID, 10, 32); err == nil {
		return uint32(n), true
	}
	var gid uint32
	ok := scanColonFile(groupFile, func(f []string) bool {
		if len(f) < 3 || f[0] != nameOrGID {
			return false
		}
		n, err := strconv.ParseUint(f[2], 10, 32)
		gid = uint32(n)
		return err == nil
	})
	return gid, ok
}

// supplementaryGroups lists the groups that name the user as a member, plus its primary group.
func supplementaryGroups(user string, primary uint32) []uint32 {
	groups := []uint32{primary}
	scanColonFile(groupFile, func(f []string) bool {
		if len(f) < 4 {
			return false
		}
		for _, member := range strings.Split(f[3], ",") {
			if member == user {
				if n, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(n) != primary {
					groups = append(groups, uint32(n))
				}
			}
		}
		return false
	})
	return groups
}

// scanColonFile calls match for each line's fields until it returns true.
func scanColonFile(path string, match func([]string) bool) bool {
	file, err := os.Open(path)
	if err != nil {
		return false
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		if match(strings.Split(scanner.Text(), ":")) {
			return true
		}
	}
	return false
}
