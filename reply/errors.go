package reply

import "errors"

// Errors returned by [Sender.Send], [Sender.Flush] and [IntendTx]. Match them
// with [errors.Is]: they are wrapped with detail.
var (
	// ErrMaybeLost reports a reply whose last send ended with its outcome
	// unknown, which the policy ([AtMostOnce], or [Native] past its
	// platform's window) refused to send again: it may have reached the
	// platform, or may be lost. Send logs it too, and every later Send of the
	// reply returns it again.
	ErrMaybeLost = errors.New("reply: outcome unknown, not sent again: possibly lost")
	// ErrNoReply reports a Send with compose nil that found no record of the
	// reply: there was nothing to send.
	ErrNoReply = errors.New("reply: no recorded reply")
	// ErrBadRecord reports a record of a reply that cannot be read (written
	// by another program or a newer version, or cut short by a store that
	// dropped its result): Send neither sends nor overwrites it.
	ErrBadRecord = errors.New("reply: unreadable record")
)

// notSentError is an error a [SendFunc] marked with [NotSent].
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// NotSent marks err as a failure the platform answered before accepting the
// message (a 4xx other than LINE's 409 for a retry key it accepted already):
// the reply was not sent, so the next [Sender.Send] sends it again under any
// policy. Any other error from a [SendFunc] leaves the outcome unknown.
// NotSent(nil) is nil.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &notSentError{err: err}
}

// IsNotSent reports whether err, or an error it wraps, was marked with
// [NotSent].
func IsNotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}
