// Package recordtest holds what the tests of the record writers (record,
// observer/kvmrecord) share: the policy their sample records vouch for, the
// comparison with a golden file, and the check of a document against
// Python's own json.dumps. Only tests import it.
package recordtest
