package target

// QueueLen is the number of items waiting for the applier (tests only).
func QueueLen(s *Server) int { return len(s.queue) }
