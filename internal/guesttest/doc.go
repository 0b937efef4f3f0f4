// Package guesttest holds what guest tests share: the pinned kernel, built
// (or restored from the cache and verified) once per test binary.
package guesttest
