package policy

import "strconv"

// UDPBindRow reads rule as the one row shape an ABI-10 sidecar may hold,
// Phobos's UDP_BIND_ROW: exactly "allow <port> udp", single spaces, the
// port in canonical ASCII decimal (no sign, no leading zero, at most five
// digits). It returns the port, which may exceed 65535: callers name that
// problem themselves.
func UDPBindRow(rule string) (port int, ok bool) {
	const pre, post = "allow ", " udp"
	if len(rule) <= len(pre)+len(post) || rule[:len(pre)] != pre || rule[len(rule)-len(post):] != post {
		return 0, false
	}
	digits := rule[len(pre) : len(rule)-len(post)]
	if len(digits) > 5 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	port, _ = strconv.Atoi(digits)
	return port, true
}
