package target

// QueueLen is the number of items waiting for the applier (tests only).
func QueueLen(s *Server) int { return len(s.queue) }

// QueueBytes is the encoded bytes of the batches waiting for the applier
// (tests only).
func QueueBytes(s *Server) int { b, _ := s.queued.state(); return b }

// QueueWaiting is the number of receivers waiting for room in the queue's
// byte bound (tests only).
func QueueWaiting(s *Server) int { _, w := s.queued.state(); return w }
