// Package guestkernel turns a verb's --kernel value into what a guest
// boots: a bzImage file taken as it is, or a pin built, unpacked or
// restored from the cache, with a Debian image's modules and machine; and
// what the kernel proof holds the booted kernel to (the pin's Landlock ABI,
// the release its bzImage header names).
package guestkernel
