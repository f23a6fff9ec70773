package controlplane

import "errors"

// Sentinel errors. ObjectError.Err wraps one of these when the object was left out
// for a reason that is not a field-level validation error (those are a
// field.ErrorList aggregate and read exactly as the apiserver's).
var (
	// ErrUnknownKind: the object is of a kind the control plane does not handle.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrDuplicate: an object of the same kind, namespace and name came earlier.
	ErrDuplicate = errors.New("duplicate object")
	// ErrRangeFull: no ClusterIP or node port was left to allocate dynamically.
	ErrRangeFull = errors.New("range is full")
	// ErrInvalidConfig: the Config is unusable, so no Service can be allocated.
	ErrInvalidConfig = errors.New("invalid control plane config")
)
