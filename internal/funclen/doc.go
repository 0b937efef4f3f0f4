// Package funclen measures the length of every function declaration in a Go
// source tree, so a test can keep the longest one short enough to read.
package funclen
