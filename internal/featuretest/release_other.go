//go:build !linux

package featuretest

// release is empty where uname's release is not read: no feature by
// release is offered, and Landlock-less kernels skip.
func release() string { return "" }
