// Package tool is what `lockstep policy` does with policy files, without
// applying them: check each file (every problem at once, then the grants
// wider than they look), print or rewrite the canonical form, hash, diff
// and union. Each operation writes its results and problems as the verb
// prints them and returns its exit status (0 ok, 1 problems or
// differences).
package tool
