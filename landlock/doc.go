// Package landlock holds what lockstep knows about Linux Landlock, once:
// every access right and scope with its bit, the name the kernel's audit
// records give it, the policy sections that grant it and the ABI version
// that introduced it ([Rights]); the restrict_self flags ([RestrictSelfFlags]);
// what each ABI version handles ([ABITable], derived from the rights); the
// first ABI of each feature lockstep relies on ([ABIAuditRecords], [ABIUDP],
// …); what an older ABI leaves unrestricted ([Gaps]); and which rights each
// system call can be refused for ([Syscalls]).
//
// The module's other tables of rights are derived from these: the
// enforcer's handled masks, section rights and right names, the audit
// parser's blockers, the attribution's rights and sections, the observer's
// join, the self-test's refusals. Adding a right (ABI 12's, say) is one row here plus the
// behaviour that uses it.
//
// It is a leaf: it imports nothing of the module, and nothing outside the
// standard library, so the parsers that use it (evidence/attribute,
// observer/audit) still build on any OS. It never asks the kernel anything;
// the enforcer does (enforcer.HostABI). Its tests hold every constant to
// golang.org/x/sys/unix (generated from the kernel's uapi headers) and every
// ABI row to go-landlock's presets.
//
// It is exported, not internal, because the pruner is a library: a program
// using evidence/attribute reads refusals whose rights are [Right] values, and
// may well want to know which ABI enforces them.
package landlock
