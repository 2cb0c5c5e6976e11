package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// The operations of the operator CLI answer with a View (what it prints)
// or one of two errors it words itself: an InputError (a wrong value in
// the command line) or a Refusal (a request that cannot succeed, found
// out before or instead of the cluster refusing it).

// View is an operation's answer: one JSON object (encoding/json, with
// --json) or text (WriteText).
type View interface {
	WriteText(w io.Writer) error
}

// InputError is a mistake in the caller's input (a command line's value),
// not an answer of the cluster: logplayer exits 2 for it.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// Refusal is a request that cannot succeed, as the operation found out
// itself (a server id not in the configuration, an unknown target id);
// logplayer prints it as "<command> refused: <Refusal>".
type Refusal struct{ msg string }

func (e *Refusal) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &Refusal{msg: fmt.Sprintf(format, args...)}
}

// Done is a write's result: a sentence, or {"message": ..., "ok": true}.
type Done string

func (d Done) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Message string `json:"message"`
		OK      bool   `json:"ok"`
	}{string(d), true})
}

// WriteText prints the sentence as a line.
func (d Done) WriteText(w io.Writer) error {
	_, err := fmt.Fprintln(w, string(d))
	return err
}
