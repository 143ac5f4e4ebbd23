package main

// sysMemfdCreate is memfd_create(2) on arm64 (the syscall package of Go 1.19 lacks it).
const sysMemfdCreate = 279
