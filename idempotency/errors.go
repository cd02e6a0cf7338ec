package idempotency

import "errors"

// Retryable marks a handler error as safe to run again under the same key:
// the handler knows its effect did not happen (it failed before committing).
// The record becomes failed-retryable, the answer carries should-retry true,
// and the next arrival of the key executes again instead of replaying.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

// IsRetryable reports whether err was marked with Retryable.
func IsRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// Reject marks a handler error as a validation failure found before any
// effect (a missing argument, an unknown item). Nothing is stored: the key is
// released as if it had never been used, and the caller may fix the request
// and send it again under the same key.
func Reject(err error) error {
	if err == nil {
		return nil
	}
	return &rejectedError{err}
}

type rejectedError struct{ err error }

func (e *rejectedError) Error() string { return e.err.Error() }
func (e *rejectedError) Unwrap() error { return e.err }
