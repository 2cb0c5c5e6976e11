package api

// The intake queue's byte bound (Config.IntakeQueueBytes). The count bound
// alone (IntakeQueue 8192 x MaxRequestBytes 4 MiB) would let 32 GiB wait
// for the Aggregator; the byte bound caps what waits at IntakeQueueBytes
// (256 MiB by default). Bytes are reserved before a request enters the
// intake channel and released when run takes it (or drain answers it), so
// the bound holds under concurrent enqueues. A request that would go above
// it is QUEUE_FULL (RESOURCE_EXHAUSTED: nothing was written, retry later),
// except when nothing is queued, so one request of any valid size is
// always accepted.

// reserveIntake reserves size bytes of the byte bound; false: the bound is
// reached.
func (a *Aggregator) reserveIntake(size int) bool {
	n := a.intakeBytes.Add(int64(size))
	if n > a.maxIntakeBytes && n != int64(size) {
		a.intakeBytes.Add(-int64(size))
		return false
	}
	return true
}

// releaseIntake returns size bytes taken out of the intake and updates
// the gauges.
func (a *Aggregator) releaseIntake(size int) {
	a.intakeBytes.Add(-int64(size))
	a.setIntakeGauges()
}

// setIntakeGauges reports the intake's depth and queued bytes.
func (a *Aggregator) setIntakeGauges() {
	a.metrics.intakeDepth.Set(float64(len(a.intake)))
	a.metrics.intakeBytes.Set(float64(a.intakeBytes.Load()))
}
