package arrayclients

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"syscall"
)

// RetryClass tells a caller whether repeating a failed call may help.
type RetryClass int

// Retry classes.
const (
	// Permanent errors repeat until something changes (configuration,
	// identity, the array's state): retrying at once will not help.
	Permanent RetryClass = iota
	// Transient errors (timeouts, resets, unreachable or unauthenticated
	// arrays, busy answers, garbled replies) may pass on a retry with backoff.
	Transient
)

// String names the class for logs and metrics.
func (c RetryClass) String() string {
	if c == Transient {
		return "transient"
	}
	return "permanent"
}

// transientError marks an error as transient without changing its text.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// MarkTransient marks err as transient for Classify; adapters use it for
// library errors only they can recognise (an array's "busy" status).
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// Classify says whether a failed call may pass on a retry. Identity and plan
// errors and cancellation by the caller are permanent; ErrUnreachable,
// deadlines, network errors, resets, truncated or malformed replies and
// errors marked with MarkTransient are transient; anything else is permanent.
func Classify(err error) RetryClass {
	if err == nil {
		return Permanent
	}
	var te *transientError
	var ne net.Error
	var se *json.SyntaxError
	switch {
	case errors.Is(err, ErrNoIdentity), errors.Is(err, ErrAmbiguousIdentity), errors.Is(err, ErrPlanMismatch):
		return Permanent
	case errors.As(err, &te), errors.Is(err, ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		return Transient
	case errors.Is(err, context.Canceled):
		return Permanent
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &se):
		return Transient
	}
	return Permanent
}

// IsTransient reports whether Classify(err) is Transient.
func IsTransient(err error) bool { return err != nil && Classify(err) == Transient }
