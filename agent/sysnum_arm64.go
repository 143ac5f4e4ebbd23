package main

// System call numbers on arm64 that the syscall package of Go 1.19 lacks.
const (
	sysMemfdCreate = 279 // memfd_create(2)
	sysSetns       = 268 // setns(2)
)
