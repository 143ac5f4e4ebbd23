package main

// System call numbers on amd64 that the syscall package of Go 1.19 lacks.
const (
	sysMemfdCreate = 319 // memfd_create(2)
	sysSetns       = 308 // setns(2)
)
