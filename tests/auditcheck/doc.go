// Package auditcheck is an outside checker of fence-before-delete: it
// reads only the arrays' own audit files (<array>.jsonl, the JSON lines
// the simulators write; format in tests/README.md) and the API server's
// audit log, and imports nothing of fenced.
//
// For every pod that one of fenced's users deleted, it finds the node the
// pod was bound to (the scheduler's pods/binding, logged with its body)
// and the strings that name that node (its name and the CSI node IDs in
// its csi.volume.kubernetes.io/nodeid annotation, from the Node's
// creation, and the host names and addresses inside them). On every array
// where the node had access before the deletion, it wants a write that
// cut the node's access, answered before the deletion arrived, by a
// requester other than a CSI driver, and no write giving the node access
// again between that cut and the deletion.
//
// Which writes concern the node is read from the objects each write
// changed, before and after: a string names the node when it holds one of
// the node's names (whole, or between separators), or is the id of
// another object that does (an SDC, a host); a write cuts when it removes
// such a string from an object, or removes anything from an object whose
// own id or name names the node (a host losing its initiators).
package auditcheck
