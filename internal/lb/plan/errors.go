package plan

import "errors"

// ErrNoNodes: a node-ip mode Service has no node to be reached on (no Ready node
// with an address of its families; with externalTrafficPolicy Local, none that
// also has a ready endpoint of it).
var ErrNoNodes = errors.New("no nodes")
