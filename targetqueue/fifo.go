package targetqueue

import "strconv"

// compactAfter is how many popped slots a fifo tolerates at its head before
// it moves the live messages down: large enough that steady traffic rarely
// copies, small enough that dead slots cost little memory.
const compactAfter = 256

// fifo is a slice-backed queue of messages with a running byte count.
type fifo struct {
	msgs  []Msg // live messages are msgs[head:]
	head  int
	bytes int64
}

func (f *fifo) len() int { return len(f.msgs) - f.head }

func (f *fifo) front() Msg { return f.msgs[f.head] }

func (f *fifo) push(m Msg) {
	f.msgs = append(f.msgs, m)
	f.bytes += m.Bytes
}

func (f *fifo) pop() Msg {
	m := f.msgs[f.head]
	f.msgs[f.head] = Msg{} // drop the slices for the garbage collector
	f.head++
	f.bytes -= m.Bytes
	switch {
	case f.head == len(f.msgs):
		f.msgs, f.head = f.msgs[:0], 0
	case f.head >= compactAfter && 2*f.head >= len(f.msgs):
		n := copy(f.msgs, f.msgs[f.head:])
		clear(f.msgs[n:])
		f.msgs, f.head = f.msgs[:n], 0
	}
	return m
}

// reset empties the fifo and releases its memory: a suspended target must
// not keep a full queue's backing array alive.
func (f *fifo) reset() { *f = fifo{} }

func (f *fifo) appendLSNs(b []byte) []byte { return AppendLSNs(b, f.msgs[f.head:]) }

// AppendLSNs appends "[1 2 5p]" to b: the messages' LSNs, a "p" marking a
// progress marker. For logs, panics and tests.
func AppendLSNs(b []byte, msgs []Msg) []byte {
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(m.LSN), 10)
		if m.IsProgress() {
			b = append(b, 'p')
		}
	}
	return append(b, ']')
}
