// Package ops holds the tests of what an operator installs and runs: the
// Debian package (installed into a throwaway Debian root, and the operator's
// guide's walkthrough on three such roots: certificates from `fenced pki`,
// three replicas, `fenced status --config` on each), the Kubernetes
// RBAC manifest (exercised against a real API server with only that role),
// the metrics reference and the example alert rules, and the checks that
// no secret leaks into logs, status, metrics or error messages.
//
// Tests that need root, debootstrap or the Kubernetes test bed skip on a
// developer's machine when a prerequisite is missing, and fail when CI=true.
package ops
